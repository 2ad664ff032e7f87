/* Unit tests: client/ctl/job/archivewrite.c and archiveread.c, a dump as one
 * tar.zst stream: entry names are judged (no absolute path, no "..", only
 * manifest.json and tree-ROOT/FILE); a stream written reads back the same
 * files; a damaged or cut stream is refused; hostile archives (made here
 * with libarchive's own writer and zstd filter: a "../" name, an absolute
 * one, a symbolic link, a hard link, a device, a directory, no manifest
 * first, a file twice, many entries not in the manifest, past the limits)
 * are refused with nothing made outside the directory they are unpacked
 * into, and no link or device made inside it; that directory is made only
 * in a safe parent, and removed whole. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cJSON.h>

#include "runner.h"

#include "archivewrite.h"
#include "archiveread.h"
#include "digest.h"
#include "manifest.h"
#include "workdir.h"
#include "zstream.h"

static char top[64];
static int top_fd = -1, src_fd = -1;
static char *manifest_text;
static size_t manifest_len;

static const char *const names[] = { "inventory.img", "pages-1.img", "core-5.img" };
#define PAGES_SIZE (2 * 1024 * 1024 + 3)

static void put(int fd, const char *name, const void *data, size_t len)
{
        int f = openat(fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(f, 0);
        ck_assert_int_eq(write(f, data, len), (ssize_t) len);
        close(f);
}

static char *slurp(int dir_fd, const char *name, size_t *ret_len)
{
        int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
        struct stat st;
        char *buf;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(fstat(fd, &st), 0);
        buf = malloc((size_t) st.st_size + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(read(fd, buf, (size_t) st.st_size), st.st_size);
        buf[st.st_size] = '\0';
        close(fd);
        *ret_len = (size_t) st.st_size;
        return buf;
}

/* top/src: a dump of one tree (tree-5) with its manifest and digests. */
static void setup(void)
{
        ctl_digest_set set = { 0 };
        int pids[1] = { 5 };
        ctl_manifest_tree tree = { .root = 5, .images = "tree-5", .pids = pids, .n_pids = 1, .files = &set };
        ctl_manifest m = { .criu_version = "4.2", .trees = &tree, .n_trees = 1 };
        ctl_digest_tree dt = { .name = "tree-5", .set = &set };
        char part[128], err[256];
        unsigned char *pages = malloc(PAGES_SIZE);
        int fd;

        snprintf(top, sizeof(top), "/tmp/unit-archive-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(top));
        top_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(mkdirat(top_fd, "src", 0700), 0);
        ck_assert_int_eq(mkdirat(top_fd, "out", 0700), 0);
        src_fd = openat(top_fd, "src", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_eq(mkdirat(src_fd, "tree-5", 0700), 0);
        dt.dir_fd = openat(src_fd, "tree-5", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; i < PAGES_SIZE; i++)
                pages[i] = (unsigned char) (i % 251);
        put(dt.dir_fd, "pages-1.img", pages, PAGES_SIZE);
        put(dt.dir_fd, "inventory.img", "inventory", 9);
        put(dt.dir_fd, "core-5.img", "core", 4);
        free(pages);
        ck_assert_msg(ctl_digest_compute(&dt, 1, NULL, err, sizeof(err)) == 0, "%s", err);
        close(dt.dir_fd);
        m.selector = cJSON_Parse("{\"tree\":5}");
        fd = ctl_manifest_create_part(src_fd, part, sizeof(part));
        ck_assert_int_eq(ctl_manifest_write(&m, src_fd, fd, part), 0);
        close(fd);
        cJSON_Delete(m.selector);
        ctl_digest_set_free(&set);
        manifest_text = slurp(src_fd, CTL_MANIFEST_NAME, &manifest_len);
}

static void teardown(void)
{
        char cmd[128];

        free(manifest_text);
        close(src_fd);
        close(top_fd);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
        ck_assert_int_eq(system(cmd), 0);
}

static int open_out(void)
{
        int fd = openat(top_fd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        return fd;
}

/* src streamed into top/NAME. */
static void write_archive(const char *name)
{
        ctl_manifest m = { 0 };
        ctl_archive_stats st;
        char err[512] = "";
        int fd = openat(top_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        ck_assert_msg(ctl_manifest_read(src_fd, "src", &m, err, sizeof(err)) == 0, "%s", err);
        ck_assert_msg(ctl_archive_write(src_fd, &m, fd, &st, err, sizeof(err)) == 0, "write: %s", err);
        ck_assert_uint_eq(st.files, 3);
        ck_assert_uint_eq(st.image_bytes, PAGES_SIZE + 13);
        ck_assert_uint_lt(st.stream_bytes, PAGES_SIZE / 4); /* compressed */
        close(fd);
        ctl_manifest_free(&m);
}

/* top/NAME unpacked into top/out with lim; the result, err said. */
static int read_archive(const char *name, unsigned long long max_files, char *err, size_t size)
{
        ctl_archive_limits lim = { max_files, 1ULL << 40 };
        ctl_manifest m = { 0 };
        ctl_archive_stats st;
        int in = openat(top_fd, name, O_RDONLY | O_CLOEXEC), out = open_out(), r;

        ck_assert_int_ge(in, 0);
        err[0] = '\0';
        r = ctl_archive_read(in, out, &lim, &m, &st, err, size);
        ck_assert_msg(r == 0 || *err, "no sentence for %d", r);
        ctl_manifest_free(&m);
        close(in);
        close(out);
        return r;
}

/* What is in top and top/out (top/out/tree-5 once made): only what the
 * reader may make, and only regular files. */
static void assert_nothing_outside(void)
{
        const char *const allowed_top[] = { "src", "out", "a.tar.zst", "bad.tar.zst" };
        DIR *d = fdopendir(dup(top_fd));
        struct dirent *de;
        struct stat st;

        ck_assert_ptr_nonnull(d);
        rewinddir(d);
        while ((de = readdir(d))) {
                bool ok = de->d_name[0] == '.';

                for (size_t i = 0; i < sizeof(allowed_top) / sizeof(allowed_top[0]); i++)
                        ok |= strcmp(de->d_name, allowed_top[i]) == 0;
                ck_assert_msg(ok, "%s was made outside the directory", de->d_name);
        }
        closedir(d);
        if (fstatat(top_fd, "out/tree-5", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                char tree[PATH_MAX];

                snprintf(tree, sizeof(tree), "%s/out/tree-5", top);
                d = opendir(tree);
                ck_assert_ptr_nonnull(d);
                while ((de = readdir(d))) {
                        char path[2 * PATH_MAX];

                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", tree, de->d_name);
                        ck_assert_int_eq(lstat(path, &st), 0);
                        ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file", path);
                }
                closedir(d);
        }
}

START_TEST(test_entry_names)
{
        static const char *const bad[] = { "../x", "/etc/passwd", "tree-12/../x", "tree-12/a/b", "tree-012/x",
                                           "tree-/x", "tree-1x/y", "tree-12/", "tree-12/dump.log", "./manifest.json",
                                           "tree-12345678901/x", "tree-12", "x", "", "tree-12/..", "manifest.json/" };
        char tree[32];
        const char *file = NULL;

        ck_assert_int_eq(ctl_archive_entry_name("manifest.json", tree, sizeof(tree), &file), 0);
        ck_assert_int_eq(ctl_archive_entry_name("tree-12/pages-1.img", tree, sizeof(tree), &file), 1);
        ck_assert_str_eq(tree, "tree-12");
        ck_assert_str_eq(file, "pages-1.img");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(ctl_archive_entry_name(bad[i], tree, sizeof(tree), &file) == -EINVAL, "took '%s'",
                              bad[i]);
}
END_TEST

START_TEST(test_round_trip)
{
        char err[512];
        int out;

        write_archive("a.tar.zst");
        ck_assert_msg(read_archive("a.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)) == 0, "read: %s", err);
        out = open_out();
        for (size_t i = 0; i < 3; i++) {
                char path[64];
                size_t a_len, b_len;
                int t = openat(src_fd, "tree-5", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                char *a = slurp(t, names[i], &a_len), *b;

                snprintf(path, sizeof(path), "tree-5/%s", names[i]);
                b = slurp(out, path, &b_len);
                ck_assert_uint_eq(a_len, b_len);
                ck_assert(memcmp(a, b, a_len) == 0);
                free(a);
                free(b);
                close(t);
        }
        close(out);
        assert_nothing_outside();
}
END_TEST

/* A byte changed in the compressed stream, or the stream cut short. */
START_TEST(test_damaged_stream)
{
        char err[512];
        size_t len;
        char *data;

        write_archive("a.tar.zst");
        data = slurp(top_fd, "a.tar.zst", &len);
        if (_i == 0)
                data[len / 2] ^= 0x40;
        put(top_fd, "bad.tar.zst", data, _i == 0 ? len : len / 2);
        free(data);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        assert_nothing_outside();
}
END_TEST

/* ---- hostile archives ---- */

struct hentry {
        const char *name;
        int type;                     /* AE_IFREG, AE_IFLNK, AE_IFCHR, AE_IFDIR; 0: a hard link */
        const char *data;             /* NULL: the manifest's text */
        const char *link;
};

static void add(struct archive *a, const struct hentry *h)
{
        struct archive_entry *e = archive_entry_new();
        const char *data = h->data ? h->data : manifest_text;
        size_t len = h->data ? strlen(h->data) : manifest_len;

        archive_entry_set_pathname(e, h->name);
        archive_entry_set_perm(e, 0600);
        if (h->type == 0) {
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_hardlink(e, h->link);
                len = 0;
        } else
                archive_entry_set_filetype(e, (unsigned) h->type);
        if (h->type == AE_IFLNK)
                archive_entry_set_symlink(e, h->link);
        if (h->type == AE_IFCHR)
                archive_entry_set_rdev(e, makedev(1, 3));
        if (h->type != AE_IFREG && h->type != 0)
                len = 0;
        archive_entry_set_size(e, (la_int64_t) len);
        ck_assert_int_eq(archive_write_header(a, e), ARCHIVE_OK);
        if (len)
                ck_assert_int_eq(archive_write_data(a, data, len), (la_ssize_t) len);
        archive_entry_free(e);
}

/* top/bad.tar.zst of entries (n of them), then extra "tree-5/xN" files. */
static void hostile(const struct hentry *entries, size_t n, int extra)
{
        struct archive *a = archive_write_new();
        char path[96], name[32];

        snprintf(path, sizeof(path), "%s/bad.tar.zst", top);
        ck_assert_int_eq(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_open_filename(a, path), ARCHIVE_OK);
        for (size_t i = 0; i < n; i++)
                add(a, &entries[i]);
        for (int i = 0; i < extra; i++) {
                snprintf(name, sizeof(name), "tree-5/x%d", i);
                add(a, &(struct hentry) { name, AE_IFREG, "x", NULL });
        }
        ck_assert_int_eq(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

static const struct {
        struct hentry e[2];
        const char *said;
} hostile_cases[] = {
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "../evil", AE_IFREG, "evil", NULL } }, "not named" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/../../evil", AE_IFREG, "evil", NULL } },
          "not named" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "/tmp/evil-cudackpt-unit", AE_IFREG, "evil", NULL } },
          "not named" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/inventory.img", AE_IFLNK, NULL, "/etc/passwd" } },
          "not a regular file" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/inventory.img", 0, NULL, "manifest.json" } },
          "not a regular file" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/inventory.img", AE_IFCHR, NULL, NULL } },
          "not a regular file" },
        /* libarchive names a directory "tree-5/core-5.img/". */
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/core-5.img", AE_IFDIR, NULL, NULL } },
          "not named" },
        { { { "tree-5/inventory.img", AE_IFREG, "inventory", NULL }, { "manifest.json", AE_IFREG, NULL, NULL } },
          "first entry is not manifest.json" },
        { { { "manifest.json", AE_IFLNK, NULL, "/etc/shadow" }, { "tree-5/inventory.img", AE_IFREG, "x", NULL } },
          "first entry is not manifest.json" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/inventory.img", AE_IFREG, "inventorY", NULL } },
          "digest is not the manifest's" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "tree-5/inventory.img", AE_IFREG, "inv", NULL } },
          "the manifest says 9" },
        { { { "manifest.json", AE_IFREG, NULL, NULL }, { "manifest.json", AE_IFREG, NULL, NULL } }, "not named" },
};

START_TEST(test_hostile)
{
        char err[512];

        hostile(hostile_cases[_i].e, 2, 0);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, hostile_cases[_i].said), "case %d said '%s'", _i, err);
        ck_assert_int_ne(access("/tmp/evil-cudackpt-unit", F_OK), 0);
        assert_nothing_outside();
}
END_TEST

/* The manifest, then a flood of entries it does not name: refused at the
 * first, nothing of them made. */
START_TEST(test_many_entries)
{
        const struct hentry m = { "manifest.json", AE_IFREG, NULL, NULL };
        char err[512];
        struct stat st;

        hostile(&m, 1, 20000);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "tree-5/x0 is not in the manifest"), "said '%s'", err);
        ck_assert_int_ne(fstatat(top_fd, "out/tree-5/x0", &st, 0), 0);
        assert_nothing_outside();
}
END_TEST

/* A file twice. */
START_TEST(test_twice_missing_limits)
{
        const struct hentry twice[] = { { "manifest.json", AE_IFREG, NULL, NULL },
                                        { "tree-5/inventory.img", AE_IFREG, "inventory", NULL },
                                        { "tree-5/inventory.img", AE_IFREG, "inventory", NULL } };
        char err[512];

        hostile(twice, 3, 0);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "comes twice"), "said '%s'", err);
        assert_nothing_outside();
}
END_TEST

/* A file missing, and the limit on files. */
START_TEST(test_missing_and_limit)
{
        const struct hentry some[] = { { "manifest.json", AE_IFREG, NULL, NULL },
                                       { "tree-5/inventory.img", AE_IFREG, "inventory", NULL } };
        char err[512];

        if (_i == 0) {
                hostile(some, 2, 0);
                ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
                ck_assert_msg(strstr(err, "tree-5/core-5.img is missing"), "said '%s'", err);
        } else {
                write_archive("a.tar.zst");
                ck_assert_int_eq(read_archive("a.tar.zst", 2, err, sizeof(err)), -E2BIG);
                ck_assert_msg(strstr(err, "--archive-max-files"), "said '%s'", err);
        }
        assert_nothing_outside();
}
END_TEST

/* A manifest whose file sizes add up past 2^64 (2048 files of 2^53
 * bytes, each within what a size may be): the sum must not wrap round
 * under --archive-max-bytes, which would let the stream fill the disk. */
START_TEST(test_bytes_wrap)
{
        const struct hentry m = { "manifest.json", AE_IFREG, NULL, NULL };
        cJSON *root = cJSON_Parse(manifest_text), *files = cJSON_CreateArray();
        cJSON *tree = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "trees"), 0);
        char err[512], name[32];
        struct stat st;

        ck_assert_ptr_nonnull(tree);
        for (int i = 0; i < 2048; i++) {
                cJSON *f = cJSON_CreateObject();

                snprintf(name, sizeof(name), "f%04d.img", i);
                cJSON_AddStringToObject(f, "name", name);
                /* Raw: cJSON would print the number rounded to 15 digits. */
                cJSON_AddRawToObject(f, "size", "9007199254740992");
                cJSON_AddStringToObject(f, "xxh3_128", "0123456789abcdef0123456789abcdef");
                cJSON_AddItemToArray(files, f);
        }
        ck_assert(cJSON_ReplaceItemInObjectCaseSensitive(tree, "files", files));
        free(manifest_text);
        manifest_text = cJSON_PrintUnformatted(root);
        manifest_len = strlen(manifest_text);
        cJSON_Delete(root);
        hostile(&m, 1, 0);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -E2BIG);
        ck_assert_msg(strstr(err, "--archive-max-bytes"), "said '%s'", err);
        ck_assert_int_ne(fstatat(top_fd, "out/tree-5", &st, 0), 0);
        assert_nothing_outside();
}
END_TEST

/* A manifest of 4 MiB of "0," (2 million values, a few kB of zstd):
 * refused before cJSON makes an item of each (70 bytes apiece: 16 MiB of
 * them took 680 MB). */
START_TEST(test_manifest_values)
{
        const struct hentry m = { "manifest.json", AE_IFREG, NULL, NULL };
        const size_t n = 2 * 1024 * 1024;
        char err[512];

        free(manifest_text);
        manifest_text = malloc(2 * n + 16);
        ck_assert_ptr_nonnull(manifest_text);
        memcpy(manifest_text, "{\"x\":[", 6);
        for (size_t i = 0; i < n; i++)
                memcpy(manifest_text + 6 + 2 * i, "0,", 2);
        memcpy(manifest_text + 6 + 2 * n, "0]}", 4);
        manifest_len = strlen(manifest_text);
        hostile(&m, 1, 0);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "more than 1000000 JSON values"), "said '%s'", err);
        assert_nothing_outside();
}
END_TEST

/* tar's octal field of w bytes at p. */
static void octal(unsigned char *p, size_t w, unsigned long long v)
{
        char f[32];

        snprintf(f, sizeof(f), "%0*llo", (int) w - 1, v);
        memcpy(p, f, w);
}

/* A header bomb: an old GNU sparse manifest.json whose map goes on for
 * 16 MiB of extension blocks, 21 entries each (a few kB of zstd).
 * libarchive keeps every entry of the map before the header is judged:
 * it took 4 GB for 2 GiB of such blocks (200 kB of stream).  Refused once
 * the header has taken AREAD_HEADER_MAX of the stream. */
START_TEST(test_header_bomb)
{
        static unsigned char h[512], ext[512];
        char err[512];
        unsigned sum = 0;
        ctl_zout z;
        int fd = openat(top_fd, "bad.tar.zst", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        memcpy(h, "manifest.json", 13);
        octal(h + 100, 8, 0600);
        octal(h + 108, 8, 0);
        octal(h + 116, 8, 0);
        octal(h + 124, 12, 0);
        octal(h + 136, 12, 0);
        h[156] = 'S';
        memcpy(h + 257, "ustar  ", 8);
        octal(h + 386, 12, 0); /* one map entry here, the rest in extensions */
        octal(h + 398, 12, 0);
        h[482] = 1;            /* extended */
        octal(h + 483, 12, 1); /* the real size */
        memset(h + 148, ' ', 8);
        for (size_t i = 0; i < sizeof(h); i++)
                sum += h[i];
        snprintf((char *) h + 148, 8, "%06o", sum);
        for (int i = 0; i < 21; i++) {
                octal(ext + 24 * i, 12, 0);
                octal(ext + 24 * i + 12, 12, 0);
        }
        ext[504] = 1;
        ck_assert_int_eq(ctl_zout_open(&z, fd, 3, 1), 0);
        ck_assert_int_eq(ctl_zout_write(&z, h, sizeof(h)), 0);
        for (int i = 0; i < 32768; i++)
                ck_assert_int_eq(ctl_zout_write(&z, ext, sizeof(ext)), 0);
        ext[504] = 0;
        ck_assert_int_eq(ctl_zout_write(&z, ext, sizeof(ext)), 0);
        memset(ext, 0, sizeof(ext));
        ck_assert_int_eq(ctl_zout_write(&z, ext, sizeof(ext)), 0);
        ck_assert_int_eq(ctl_zout_write(&z, ext, sizeof(ext)), 0);
        ck_assert_int_eq(ctl_zout_finish(&z), 0);
        ctl_zout_free(&z);
        close(fd);
        ck_assert_int_eq(read_archive("bad.tar.zst", CTL_ARCHIVE_MAX_FILES, err, sizeof(err)), -EBADMSG);
        ck_assert_msg(strstr(err, "header takes more than"), "said '%s'", err);
        assert_nothing_outside();
}
END_TEST

/* The private directory: only in a parent no one else may write (or a
 * sticky one), made 0700, removed with what an unpacked archive holds. */
START_TEST(test_workdir)
{
        char parent[128], err[256];
        ctl_workdir w;
        struct stat st;
        int fd;

        snprintf(parent, sizeof(parent), "%s/shared", top);
        ck_assert_int_eq(mkdir(parent, 0700), 0);
        ck_assert_int_eq(chmod(parent, 0777), 0);
        ck_assert_int_eq(ctl_workdir_make(parent, &w, err, sizeof(err)), -EPERM);
        ck_assert_msg(strstr(err, "not sticky"), "said '%s'", err);
        ck_assert_int_eq(chmod(parent, 01777), 0);
        ck_assert_msg(ctl_workdir_make(parent, &w, err, sizeof(err)) == 0, "%s", err);
        ck_assert_int_eq(fstat(w.fd, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_ptr_nonnull(strstr(w.path, "/shared/cudackpt-archive."));
        ck_assert_int_eq(mkdirat(w.fd, "tree-5", 0700), 0);
        fd = openat(w.fd, "tree-5/pages-1.img", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(symlinkat("/etc/passwd", w.fd, "tree-5/link"), 0);
        put(w.fd, CTL_MANIFEST_NAME, "{}", 2);
        ck_assert_int_eq(ctl_workdir_remove(&w), 0);
        ck_assert_int_ne(access(w.path, F_OK), 0);
        ck_assert_int_eq(access("/etc/passwd", F_OK), 0);
        ck_assert_int_eq(rmdir(parent), 0);
}
END_TEST

const char unit_suite_name[] = "archive";

void unit_tests(TCase *tc)
{
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_entry_names);
        tcase_add_test(tc, test_round_trip);
        tcase_add_loop_test(tc, test_damaged_stream, 0, 2);
        tcase_add_loop_test(tc, test_hostile, 0, (int) (sizeof(hostile_cases) / sizeof(hostile_cases[0])));
        tcase_add_test(tc, test_many_entries);
        tcase_add_test(tc, test_twice_missing_limits);
        tcase_add_loop_test(tc, test_missing_and_limit, 0, 2);
        tcase_add_test(tc, test_bytes_wrap);
        tcase_add_test(tc, test_header_bomb);
        tcase_add_test(tc, test_manifest_values);
        tcase_add_test(tc, test_workdir);
}
