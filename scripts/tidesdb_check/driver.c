/*
 * A small write-benchmark driver for TidesDB, linked against the very libtidesdb.a that
 * silt-bench's TidesDB adapter links (the `tidesdb` crate's bundled TidesDB, built by its
 * build script). It exists to tell a slow peer from a slow harness: the same loop and the
 * same library as TidesDB's own benchmark tool (`bench/tidesdb__bench.c` in TidesDB's
 * repository), then the same loop with exactly the adapter's options.
 *
 * Written for SiltDB (scripts/tidesdb_check.sh builds it, scripts/tidesdb_check.py runs it
 * beside silt-bench). Not derived from TidesDB's code: it follows what that tool does, as
 * described in docs/bench.md ("Is a peer's number its real number?").
 *
 * The timed loop (both option sets): every thread owns a contiguous slice of the operation
 * indexes (thread t of n: [t*num/n, (t+1)*num/n)), and writes it as transactions of --batch
 * puts: begin, put x batch, commit, free. Keys and values are made before the clock starts.
 * The clock runs from the moment all threads are released until the last one is done (wall
 * time, as the tool times thread creation to join and silt-bench its workers' first start to
 * last end); closing the database (which drains the memtables) is timed separately.
 *
 * --options tool: TidesDB's bench defaults mapped onto the 10.x configuration (see
 *   tool_options below).
 * --options adapter: what crates/silt-bench/src/engine/peer_tidesdb.rs sets: the library's
 *   defaults, block cache = --cache-bytes, sync none, log level warn, bloom filter on.
 *
 * --keys tool: the tool's keys and values: sequential keys "k%06d" (7 bytes below a million),
 *   random keys of key_bytes-1 random alphanumerics (rand()), values "val_%010d" (14 bytes);
 *   the tool's 16/100 byte sizes are buffer sizes, its keys and values are C strings and
 *   only strlen() of them is written.
 * --keys silt: silt-bench's: the index as 8 big-endian bytes padded with '0' to key_bytes,
 *   values of value_bytes from a pseudo-random 1 MiB pool; sequential = each thread its slice
 *   in order, random = uniform with replacement over 0..num (SplitMix64).
 *
 * Output: one JSON line on stdout.
 *
 * Built with -DTIDESDB_V9 against a TidesDB 9.x source tree (scripts/tidesdb_check.sh
 * --driver-for SRC), the same driver runs on TidesDB 9.x, whose configuration keeps the
 * memtable, sync mode and value separation per column family: the same options, set there.
 * That separates the version from everything else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TIDESDB_V9
#include "tidesdb.h"
#define tidesdb_strerror(rc) "error"
#else
#include <tidesdb/db.h>
#endif

#define VALUE_POOL (1u << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct args
{
    const char *options; /* tool | adapter */
    const char *keys;    /* tool | silt */
    const char *pattern; /* seq | random */
    const char *dir;
    int threads;
    int batch;
    long num;
    int key_bytes;
    int value_bytes;
    size_t cache_bytes;
    uint64_t seed;
    long write_buffer; /* > 0: override memtable_write_buffer_size */
    long stall;        /* >= 0: override memtable_l0_queue_stall_threshold */
};

/* one prepared entry: pointers into the key and value arrays */
struct work
{
    tidesdb_t *db;
    tidesdb_column_family_t *cf;
    const struct args *a;
    uint8_t *keys; /* num * key_bytes */
    size_t *key_len;
    uint8_t *vals; /* tool keys: num * 16; silt keys: the pool */
    size_t *val_off;
    size_t *val_len;
    long lo, hi;
    int retries;
    int failed;
    double end;
    pthread_barrier_t *go;
};

static void *writer(void *p)
{
    struct work *w = p;
    const int kb = w->a->key_bytes;
    pthread_barrier_wait(w->go);
    for (long i = w->lo; i < w->hi;)
    {
        long e = i + w->a->batch;
        if (e > w->hi) e = w->hi;
        tidesdb_txn_t *txn = NULL;
        int rc = tidesdb_txn_begin(w->db, &txn);
        if (rc != TDB_SUCCESS)
        {
            if (++w->retries > 1000) { w->failed = rc; break; }
            continue;
        }
        for (long j = i; j < e && rc == TDB_SUCCESS; j++)
            rc = tidesdb_txn_put(txn, w->cf, w->keys + (size_t)j * kb, w->key_len[j],
                                 w->vals + w->val_off[j], w->val_len[j], 0);
        if (rc == TDB_SUCCESS) rc = tidesdb_txn_commit(txn);
        tidesdb_txn_free(txn);
        if (rc != TDB_SUCCESS)
        {
            /* the tool retries a batch whose commit failed; so does this */
            if (++w->retries > 1000) { w->failed = rc; break; }
            continue;
        }
        i = e;
    }
    w->end = now_s();
    return NULL;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: driver --dir DIR [--options tool|adapter] [--keys tool|silt]\n"
            "              [--pattern seq|random] [--threads N] [--batch N] [--num N]\n"
            "              [--key-bytes 16] [--value-bytes 100] [--cache-bytes 67108864]\n"
            "              [--seed 42]\n"
            "  overrides, for experiments: [--write-buffer BYTES] [--stall N]\n");
    exit(2);
}

/* TidesDB's bench/ defaults (CMakeLists.txt BENCH_*, 9.3.x), on the 10.x configuration: what
 * moved from the column family to the database (memtable, sync, value separation, stall) is
 * set there; what 10.x no longer has (block indexes, max memory, min disk space, comparator,
 * use_btree) is left out. The tool asks for LZ4; the bundled build has no LZ4 (the crate's
 * `lz4` feature is off), so the pipeline stays empty unless the library reports LZ4. The tool
 * logs at DEBUG; 10.x's nearest verbose level would add per-operation tracing, so INFO (10.x's
 * default) is used. */
#ifdef TIDESDB_V9
/* 9.x: the tool's own settings, field for field (INFO logging as in the 10.x driver) */
static void tool_options(tidesdb_config_t *c, tidesdb_column_family_config_t *cf)
{
    c->num_flush_threads = 2;
    c->num_compaction_threads = 2;
    c->block_cache_size = 64u << 20;
    c->max_open_sstables = 256;
    c->log_level = TDB_LOG_INFO;
    c->max_memory_usage = 0;
    cf->write_buffer_size = 64u << 20;
    cf->level_size_ratio = 10;
    cf->dividing_level_offset = 2;
    cf->min_levels = 5;
    cf->skip_list_max_level = 12;
    cf->skip_list_probability = 0.25f;
    cf->compression_algorithm = TDB_COMPRESS_LZ4;
    cf->enable_bloom_filter = 1;
    cf->bloom_fpr = 0.01;
    cf->enable_block_indexes = 1;
    cf->index_sample_ratio = 1;
    cf->block_index_prefix_len = 16;
    cf->sync_mode = TDB_SYNC_NONE;
    cf->sync_interval_us = 128000;
    strcpy(cf->comparator_name, "memcmp");
    cf->default_isolation_level = TDB_ISOLATION_READ_COMMITTED;
    cf->klog_value_threshold = 512;
    cf->min_disk_space = 100u << 20;
    cf->l1_file_count_trigger = 4;
    cf->l0_queue_stall_threshold = 20;
    cf->use_btree = 0;
}

/* 9.x: what the adapter asks for (defaults, block cache, sync none, warn, bloom on) */
static void adapter_options(const struct args *a, tidesdb_config_t *c,
                            tidesdb_column_family_config_t *cf)
{
    c->block_cache_size = a->cache_bytes;
    c->log_level = TDB_LOG_WARN;
    cf->sync_mode = TDB_SYNC_NONE;
    cf->enable_bloom_filter = 1;
    cf->compression_algorithm = TDB_COMPRESS_NONE; /* 9.x defaults to LZ4; the adapter wants none */
}
#else
static void tool_options(tidesdb_config_t *c, tidesdb_column_family_config_t *cf)
{
    c->num_flush_threads = 2;
    c->num_compaction_threads = 2;
    c->block_cache_size = 64u << 20;
    c->max_open_sstables = 256;
    c->log_level = TDB_LOG_INFO;
    c->memtable_write_buffer_size = 64u << 20;
    c->memtable_skip_list_max_level = 12;
    c->memtable_skip_list_probability = 0.25f;
    c->memtable_sync_mode = TDB_SYNC_NONE;
    c->memtable_sync_interval_us = 128000;
    c->value_separation_threshold = 512;
    c->memtable_l0_queue_stall_threshold = 20;
    cf->level_size_ratio = 10;
    cf->dividing_level_offset = 2;
    cf->min_levels = 5;
    cf->enable_bloom_filter = 1;
    cf->bloom_fpr = 0.01;
    cf->default_isolation_level = TDB_ISOLATION_READ_COMMITTED;
    cf->l1_file_count_trigger = 4;
    if (tidesdb_compression_available(TDB_COMPRESS_LZ4))
    {
        cf->encoding_pipeline[0] = TDB_COMPRESS_LZ4;
        cf->encoding_count = 1;
    }
}

/* peer_tidesdb.rs: Config::new(dir).block_cache_size(cache).memtable_sync_mode(None)
 * .log_level(Warn); ColumnFamilyConfig::new().enable_bloom_filter(true); everything else the
 * library's defaults (the crate fills its structs from tidesdb_default_*config()). */
static void adapter_options(const struct args *a, tidesdb_config_t *c,
                            tidesdb_column_family_config_t *cf)
{
    c->block_cache_size = a->cache_bytes;
    c->memtable_sync_mode = TDB_SYNC_NONE;
    c->log_level = TDB_LOG_WARN;
    cf->enable_bloom_filter = 1;
}
#endif

int main(int argc, char **argv)
{
    struct args a = {.options = "tool",
                     .keys = "tool",
                     .pattern = "seq",
                     .dir = NULL,
                     .threads = 2,
                     .batch = 1000,
                     .num = 1000000,
                     .key_bytes = 16,
                     .value_bytes = 100,
                     .cache_bytes = 64u << 20,
                     .seed = 42,
                     .write_buffer = 0,
                     .stall = -1};
    for (int i = 1; i < argc; i++)
    {
        const char *f = argv[i];
        if (i + 1 >= argc) usage();
        const char *v = argv[++i];
        if (!strcmp(f, "--options")) a.options = v;
        else if (!strcmp(f, "--keys")) a.keys = v;
        else if (!strcmp(f, "--pattern")) a.pattern = v;
        else if (!strcmp(f, "--dir")) a.dir = v;
        else if (!strcmp(f, "--threads")) a.threads = atoi(v);
        else if (!strcmp(f, "--batch")) a.batch = atoi(v);
        else if (!strcmp(f, "--num")) a.num = atol(v);
        else if (!strcmp(f, "--key-bytes")) a.key_bytes = atoi(v);
        else if (!strcmp(f, "--value-bytes")) a.value_bytes = atoi(v);
        else if (!strcmp(f, "--cache-bytes")) a.cache_bytes = strtoull(v, NULL, 10);
        else if (!strcmp(f, "--seed")) a.seed = strtoull(v, NULL, 10);
        else if (!strcmp(f, "--write-buffer")) a.write_buffer = atol(v);
        else if (!strcmp(f, "--stall")) a.stall = atol(v);
        else usage();
    }
    int tool_opts = !strcmp(a.options, "tool");
    int tool_keys = !strcmp(a.keys, "tool");
    int seq = !strcmp(a.pattern, "seq") || !strcmp(a.pattern, "sequential");
    if (!a.dir || a.threads < 1 || a.batch < 1 || a.num < 1 || a.key_bytes < 8 ||
        (!tool_opts && strcmp(a.options, "adapter")) || (!tool_keys && strcmp(a.keys, "silt")) ||
        (!seq && strcmp(a.pattern, "random")))
        usage();

    /* keys and values, before the clock */
    const int kb = a.key_bytes;
    uint8_t *keys = calloc((size_t)a.num, kb);
    size_t *key_len = malloc(sizeof(size_t) * a.num);
    size_t *val_off = malloc(sizeof(size_t) * a.num);
    size_t *val_len = malloc(sizeof(size_t) * a.num);
    uint8_t *vals;
    if (!keys || !key_len || !val_off || !val_len) return 1;
    if (tool_keys)
    {
        static const char cs[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        const size_t vb = 24; /* room for "val_%010ld" */
        vals = malloc(vb * a.num);
        if (!vals) return 1;
        srand((unsigned)a.seed);
        for (long i = 0; i < a.num; i++)
        {
            char *k = (char *)keys + (size_t)i * kb;
            if (seq)
                snprintf(k, kb, "k%06ld", i);
            else
            {
                for (int j = 0; j < kb - 1; j++) k[j] = cs[rand() % (int)(sizeof(cs) - 1)];
                k[kb - 1] = '\0';
            }
            key_len[i] = strlen(k);
            char *v = (char *)vals + (size_t)i * vb;
            snprintf(v, vb, "val_%010ld", i);
            val_off[i] = (size_t)i * vb;
            val_len[i] = strlen(v);
        }
    }
    else
    {
        vals = malloc(VALUE_POOL + a.value_bytes + 8);
        if (!vals) return 1;
        uint64_t s = mix64(a.seed ^ 0x7a1e);
        for (size_t o = 0; o < VALUE_POOL + a.value_bytes; o += 8)
        {
            s += 0x9e3779b97f4a7c15ull;
            uint64_t r = mix64(s);
            memcpy(vals + o, &r, 8);
        }
        for (int t = 0; t < a.threads; t++)
        {
            long lo = (long)((__int128)a.num * t / a.threads);
            long hi = (long)((__int128)a.num * (t + 1) / a.threads);
            uint64_t rng = mix64(a.seed ^ 0x5117db005eed0000ull ^ ((uint64_t)t * 0x9e37));
            for (long i = lo; i < hi; i++)
            {
                uint64_t idx;
                if (seq)
                    idx = (uint64_t)i;
                else
                {
                    rng += 0x9e3779b97f4a7c15ull;
                    idx = (uint64_t)(((unsigned __int128)mix64(rng) * (uint64_t)a.num) >> 64);
                }
                uint8_t *k = keys + (size_t)i * kb;
                for (int b = 0; b < 8; b++) k[b] = (uint8_t)(idx >> (56 - 8 * b));
                memset(k + 8, '0', kb - 8);
                key_len[i] = kb;
                val_off[i] = mix64(idx ^ 0x6c69) % VALUE_POOL;
                val_len[i] = a.value_bytes;
            }
        }
    }

    tidesdb_config_t c = tidesdb_default_config();
    tidesdb_column_family_config_t cfc = tidesdb_default_column_family_config();
    c.db_path = (char *)a.dir;
    const char *cf_name = tool_opts ? "benchmark_cf" : "kv";
    if (tool_opts)
        tool_options(&c, &cfc);
    else
        adapter_options(&a, &c, &cfc);
#ifdef TIDESDB_V9
    if (a.write_buffer > 0) cfc.write_buffer_size = (size_t)a.write_buffer;
    if (a.stall >= 0) cfc.l0_queue_stall_threshold = (int)a.stall;
    const size_t write_buffer = cfc.write_buffer_size;
    const int stall = cfc.l0_queue_stall_threshold;
    const int lz4 = cfc.compression_algorithm != TDB_COMPRESS_NONE;
    const char *version = "9";
#else
    if (a.write_buffer > 0) c.memtable_write_buffer_size = (size_t)a.write_buffer;
    if (a.stall >= 0) c.memtable_l0_queue_stall_threshold = (int)a.stall;
    const size_t write_buffer = c.memtable_write_buffer_size;
    const int stall = c.memtable_l0_queue_stall_threshold;
    const int lz4 = cfc.encoding_count > 0;
    const char *version = "10";
#endif

    tidesdb_t *db = NULL;
    int rc = tidesdb_open(&c, &db);
    if (rc != TDB_SUCCESS)
    {
        fprintf(stderr, "driver: open %s: %s\n", a.dir, tidesdb_strerror(rc));
        return 1;
    }
    rc = tidesdb_create_column_family(db, cf_name, &cfc);
    if (rc != TDB_SUCCESS)
    {
        fprintf(stderr, "driver: create column family: %s\n", tidesdb_strerror(rc));
        return 1;
    }
    tidesdb_column_family_t *cf = tidesdb_get_column_family(db, cf_name);
    if (!cf) return 1;

    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)a.threads + 1);
    struct work *w = calloc(a.threads, sizeof *w);
    pthread_t *th = calloc(a.threads, sizeof *th);
    for (int t = 0; t < a.threads; t++)
    {
        w[t] = (struct work){.db = db,
                             .cf = cf,
                             .a = &a,
                             .keys = keys,
                             .key_len = key_len,
                             .vals = vals,
                             .val_off = val_off,
                             .val_len = val_len,
                             .lo = (long)((__int128)a.num * t / a.threads),
                             .hi = (long)((__int128)a.num * (t + 1) / a.threads),
                             .go = &go};
        pthread_create(&th[t], NULL, writer, &w[t]);
    }
    double start = now_s();
    pthread_barrier_wait(&go);
    double end = start;
    int retries = 0, failed = 0;
    for (int t = 0; t < a.threads; t++)
    {
        pthread_join(th[t], NULL);
        if (w[t].end > end) end = w[t].end;
        retries += w[t].retries;
        if (w[t].failed) failed = w[t].failed;
    }
    double seconds = end - start;
    double c0 = now_s();
    tidesdb_close(db);
    double close_s = now_s() - c0;

    double kavg = 0, vavg = 0;
    for (long i = 0; i < a.num; i++) kavg += key_len[i], vavg += val_len[i];
    printf("{\"driver\":\"tidesdb_check\",\"tidesdb_major\":%s,\"options\":\"%s\",\"keys\":\"%s\",\"pattern\":\"%s\","
           "\"threads\":%d,\"batch\":%d,\"num\":%ld,\"key_len_avg\":%.1f,\"value_len_avg\":%.1f,"
           "\"lz4\":%d,\"seconds\":%.4f,\"ops_per_sec\":%.0f,\"close_seconds\":%.3f,"
           "\"write_buffer\":%zu,\"stall\":%d,\"retries\":%d,\"status\":\"%s\"}\n",
           version, a.options, a.keys, seq ? "seq" : "random", a.threads, a.batch, a.num, kavg / a.num,
           vavg / a.num, lz4, seconds, a.num / seconds, close_s, write_buffer, stall, retries, failed ? tidesdb_strerror(failed) : "ok");
    return failed ? 1 : 0;
}
