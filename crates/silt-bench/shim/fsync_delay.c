/*
 * fsync_delay.so: the LD_PRELOAD shim `silt-bench run --fsync-delay-us N` puts in front of
 * every peer engine's child process (silt gets the same model through silt-wal's DelayFs,
 * because it calls fdatasync as a raw system call, which a preload cannot see).
 *
 * After a real fsync, fdatasync, sync_file_range(SYNC_FILE_RANGE_WAIT_AFTER) or
 * msync(MS_SYNC) on a regular file returns, the caller waits for one emulated device flush
 * of SILT_FSYNC_DELAY_US microseconds. So does a write to a file opened O_DSYNC or O_SYNC
 * (TidesDB's sync-full log) or a pwritev2 with RWF_DSYNC/RWF_SYNC: each of those is a
 * synchronous write, a device flush. The device model is silt-wal's DelayFs exactly:
 *
 *   merged (default): one emulated flush in flight at a time; a caller needs a flush that
 *     started after it arrived, so concurrent callers share flushes, as the kernel's block
 *     layer merges them.
 *   serial (SILT_FSYNC_DELAY_MODEL=serial): every call holds the device for a whole flush.
 *
 * Directories are not delayed (DelayFs does not delay sync_dir either). With the variable
 * unset or 0 the shim only forwards.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static long delay_us;
static int serial;
static uint64_t delayed_calls;

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_sync_file_range)(int, off64_t, off64_t, unsigned int);
static int (*real_msync)(void *, size_t, int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off64_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off64_t, int);

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dev_done = PTHREAD_COND_INITIALIZER;
static uint64_t started, finished;
static int running;
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

static void init(void)
{
    const char *d = getenv("SILT_FSYNC_DELAY_US");
    const char *m = getenv("SILT_FSYNC_DELAY_MODEL");
    delay_us = d ? atol(d) : 0;
    if (delay_us < 0) delay_us = 0;
    serial = m && strcmp(m, "serial") == 0;
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_sync_file_range =
        (int (*)(int, off64_t, off64_t, unsigned int))dlsym(RTLD_NEXT, "sync_file_range");
    real_msync = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "msync");
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 =
        (ssize_t(*)(int, const void *, size_t, off64_t))dlsym(RTLD_NEXT, "pwrite64");
    real_pwritev =
        (ssize_t(*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev");
    real_pwritev64 =
        (ssize_t(*)(int, const struct iovec *, int, off64_t))dlsym(RTLD_NEXT, "pwritev64");
    real_pwritev2 =
        (ssize_t(*)(int, const struct iovec *, int, off_t, int))dlsym(RTLD_NEXT, "pwritev2");
    real_pwritev64v2 = (ssize_t(*)(int, const struct iovec *, int, off64_t, int))dlsym(
        RTLD_NEXT, "pwritev64v2");
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Returns after one emulated flush that started after this call began. */
static void device_flush(void)
{
    int saved = errno;
    __atomic_add_fetch(&delayed_calls, 1, __ATOMIC_RELAXED);
    if (serial) {
        pthread_mutex_lock(&serial_lock);
        sleep_us(delay_us);
        pthread_mutex_unlock(&serial_lock);
        errno = saved;
        return;
    }
    pthread_mutex_lock(&dev_lock);
    uint64_t need = started + 1;
    while (finished < need) {
        if (!running) {
            started++;
            running = 1;
            pthread_mutex_unlock(&dev_lock);
            sleep_us(delay_us);
            pthread_mutex_lock(&dev_lock);
            finished = started;
            running = 0;
            pthread_cond_broadcast(&dev_done);
        } else {
            pthread_cond_wait(&dev_done, &dev_lock);
        }
    }
    pthread_mutex_unlock(&dev_lock);
    errno = saved;
}

static int regular(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

int fsync(int fd)
{
    pthread_once(&once, init);
    int r = real_fsync(fd);
    if (r == 0 && delay_us > 0 && regular(fd)) device_flush();
    return r;
}

int fdatasync(int fd)
{
    pthread_once(&once, init);
    int r = real_fdatasync(fd);
    if (r == 0 && delay_us > 0 && regular(fd)) device_flush();
    return r;
}

int sync_file_range(int fd, off64_t offset, off64_t nbytes, unsigned int flags)
{
    pthread_once(&once, init);
    int r = real_sync_file_range(fd, offset, nbytes, flags);
    if (r == 0 && delay_us > 0 && (flags & SYNC_FILE_RANGE_WAIT_AFTER)) device_flush();
    return r;
}

int msync(void *addr, size_t len, int flags)
{
    pthread_once(&once, init);
    int r = real_msync(addr, len, flags);
    if (r == 0 && delay_us > 0 && (flags & MS_SYNC)) device_flush();
    return r;
}

/* A successful write to a descriptor opened O_DSYNC or O_SYNC is a synchronous write. */
static void after_write(int fd, ssize_t r)
{
    if (r <= 0 || delay_us <= 0) return;
    int saved = errno;
    int fl = fcntl(fd, F_GETFL);
    errno = saved;
    if (fl != -1 && (fl & (O_DSYNC | O_SYNC)) != 0 && regular(fd)) device_flush();
}

ssize_t write(int fd, const void *buf, size_t n)
{
    pthread_once(&once, init);
    ssize_t r = real_write(fd, buf, n);
    after_write(fd, r);
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    pthread_once(&once, init);
    ssize_t r = real_writev(fd, iov, cnt);
    after_write(fd, r);
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    pthread_once(&once, init);
    ssize_t r = real_pwrite(fd, buf, n, off);
    after_write(fd, r);
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    pthread_once(&once, init);
    ssize_t r = real_pwrite64(fd, buf, n, off);
    after_write(fd, r);
    return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    pthread_once(&once, init);
    ssize_t r = real_pwritev(fd, iov, cnt, off);
    after_write(fd, r);
    return r;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    pthread_once(&once, init);
    ssize_t r = real_pwritev64(fd, iov, cnt, off);
    after_write(fd, r);
    return r;
}

static void after_write2(int fd, ssize_t r, int flags)
{
    if (r > 0 && delay_us > 0 && (flags & (RWF_DSYNC | RWF_SYNC)) != 0 && regular(fd))
        device_flush();
    else
        after_write(fd, r);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    pthread_once(&once, init);
    ssize_t r = real_pwritev2(fd, iov, cnt, off, flags);
    after_write2(fd, r, flags);
    return r;
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    pthread_once(&once, init);
    ssize_t r = real_pwritev64v2(fd, iov, cnt, off, flags);
    after_write2(fd, r, flags);
    return r;
}

/* For the tool's tests: how many calls were delayed in this process. */
uint64_t silt_fsync_delay_calls(void)
{
    return __atomic_load_n(&delayed_calls, __ATOMIC_RELAXED);
}
