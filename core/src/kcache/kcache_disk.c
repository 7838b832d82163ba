/* The disk tier: one file per key in the cache folder, in the entry format
 * documented in kiln/kcache.h. Every entry is checked (format, checksum,
 * full canonical descriptor) before use; a bad one is logged and replaced,
 * never used. Writes go through a temporary file and rename(2).
 *
 * Safety: every file is opened relative to the folder descriptor taken at
 * the first use (kcache_folder.c), by a name formed here from a key (32
 * hex digits), with O_NOFOLLOW; nothing read from an entry is ever used as
 * a path. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kcache_internal.h"

/* Larger files are refused without being read: no kernel image is near. */
#define KCACHE_MAX_ENTRY_BYTES ((size_t)256 << 20)

static const char entry_magic[] = KCACHE_ENTRY_MAGIC;
static const char checksum_tag[] = "checksum xxh3-128:";

bool kiln__kcache_is_entry_name(const char *name) {
  for (int i = 0; i < 32; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  return strcmp(name + 32, ".kk") == 0;
}

bool kiln__kcache_has_entry_magic(int fd) {
  char head[sizeof entry_magic - 1];
  size_t got = 0;
  while (got < sizeof head) {
    ssize_t r = pread(fd, head + got, sizeof head - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return memcmp(head, entry_magic, sizeof head) == 0;
}

kiln_status kiln__kcache_entry_encode(const char *canonical, kiln_kimage_kind kind,
                                      const void *image, size_t image_size, char **out_buf,
                                      size_t *out_size) {
  char head[128], mid[64];
  size_t clen = strlen(canonical);
  int hn = snprintf(head, sizeof head, "%scanonical %zu\n", entry_magic, clen);
  int mn = snprintf(mid, sizeof mid, "image %s %zu\n", kiln_kimage_kind_name(kind), image_size);
  size_t body = (size_t)hn + clen + (size_t)mn + image_size;
  size_t total = body + sizeof checksum_tag - 1 + 32 + 1;
  char *buf = malloc(total + 1);
  if (!buf) return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache entry: out of memory");
  char *p = buf;
  memcpy(p, head, (size_t)hn);
  p += hn;
  memcpy(p, canonical, clen);
  p += clen;
  memcpy(p, mid, (size_t)mn);
  p += mn;
  if (image_size) memcpy(p, image, image_size);
  p += image_size;
  char hex[KILN_KKEY_HEX_SIZE];
  kiln__kcache_hash_hex(buf, body, hex);
  memcpy(p, checksum_tag, sizeof checksum_tag - 1);
  p += sizeof checksum_tag - 1;
  memcpy(p, hex, 32);
  p += 32;
  *p++ = '\n';
  *p = '\0';
  *out_buf = buf;
  *out_size = total;
  return NULL;
}

/* Parses "<tag><decimal>\n" at *pos; the number has no sign, no leading
 * zero (except "0") and fits size_t. */
static bool parse_count(const char *buf, size_t size, size_t *pos, const char *tag,
                        size_t *out) {
  size_t n = strlen(tag), p = *pos;
  if (size - p < n || memcmp(buf + p, tag, n) != 0) return false;
  p += n;
  size_t start = p, v = 0;
  while (p < size && buf[p] >= '0' && buf[p] <= '9') {
    if (p - start >= 15) return false;
    v = v * 10 + (size_t)(buf[p] - '0');
    p++;
  }
  if (p == start || (buf[start] == '0' && p - start > 1) || p >= size || buf[p] != '\n')
    return false;
  *pos = p + 1;
  *out = v;
  return true;
}

static kiln_status malformed(const char *what) {
  return kiln_status_new(KILN_STATUS_MALFORMED, "%s", what);
}

kiln_status kiln__kcache_entry_decode(const char *buf, size_t size, char **out_canonical,
                                      kiln_kimage_kind *out_kind, void **out_image,
                                      size_t *out_image_size) {
  size_t pos = sizeof entry_magic - 1, clen, ilen;
  if (size < pos || memcmp(buf, entry_magic, pos) != 0)
    return size < pos && memcmp(buf, entry_magic, size) == 0
               ? malformed("truncated (ends inside the first line)")
               : malformed("not a kiln kernel-cache entry (bad first line)");
  if (!parse_count(buf, size, &pos, "canonical ", &clen))
    return malformed("truncated or bad \"canonical\" line");
  if (clen > size - pos) return malformed("truncated (inside the canonical descriptor)");
  const char *canon = buf + pos;
  if (memchr(canon, '\0', clen)) return malformed("NUL byte in the canonical descriptor");
  pos += clen;
  kiln_kimage_kind kind;
  if (parse_count(buf, size, &pos, "image ptx ", &ilen)) {
    kind = KILN_KIMAGE_PTX;
  } else if (parse_count(buf, size, &pos, "image cubin ", &ilen)) {
    kind = KILN_KIMAGE_CUBIN;
  } else {
    return malformed("truncated or bad \"image\" line");
  }
  if (ilen > size - pos) return malformed("truncated (inside the image)");
  if (ilen == 0) return malformed("empty image (no compiler makes one)");
  const char *img = buf + pos;
  pos += ilen;
  size_t body = pos;
  size_t tail = sizeof checksum_tag - 1 + 32 + 1;
  if (size - pos < tail) return malformed("truncated (no complete checksum line)");
  if (size - pos > tail) return malformed("trailing bytes after the checksum line");
  if (memcmp(buf + pos, checksum_tag, sizeof checksum_tag - 1) != 0 || buf[size - 1] != '\n')
    return malformed("bad checksum line");
  char hex[KILN_KKEY_HEX_SIZE];
  kiln__kcache_hash_hex(buf, body, hex);
  if (memcmp(buf + pos + sizeof checksum_tag - 1, hex, 32) != 0)
    return malformed("checksum mismatch (the file was changed or damaged)");
  char *c = malloc(clen + 1);
  char *im = malloc(ilen + 1);
  if (!c || !im) {
    free(c);
    free(im);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "kernel cache entry: out of memory");
  }
  memcpy(c, canon, clen);
  c[clen] = '\0';
  if (ilen) memcpy(im, img, ilen);
  im[ilen] = '\0';
  *out_canonical = c;
  *out_kind = kind;
  *out_image = im;
  *out_image_size = ilen;
  return NULL;
}

/* Reads a whole entry file (opened by name under the folder, never through
 * a symlink, only if it is a regular file of sane size). */
static kiln_status read_entry(int dirfd, const char *name, char **out_buf, size_t *out_size,
                              bool *out_absent) {
  *out_absent = false;
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) {
      *out_absent = true;
      return kiln_status_new(KILN_STATUS_NOT_FOUND, "no entry");
    }
    if (errno == ELOOP) return malformed("is a symbolic link (never followed)");
    return kiln_status_new(KILN_STATUS_IO, "cannot open: %s", strerror(errno));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return malformed("not a regular file");
  }
  if ((uint64_t)sb.st_size > KCACHE_MAX_ENTRY_BYTES) {
    close(fd);
    return malformed("larger than any kernel entry (over 256 MiB)");
  }
  size_t size = (size_t)sb.st_size, got = 0;
  char *buf = malloc(size + 1);
  if (!buf) {
    close(fd);
    return kiln_status_new(KILN_STATUS_NO_MEMORY, "out of memory");
  }
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* shrank while reading: the size check below catches it */
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  *out_buf = buf;
  *out_size = got;
  return NULL;
}

/* Which line of two canonical texts differs first, for the log. */
static void first_difference(const char *want, const char *have, char *out, size_t cap) {
  const char *a = want, *b = have;
  while (*a || *b) {
    const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
    size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
    if (la != lb || memcmp(a, b, la) != 0) {
      static const char *const fp[] = {"compiler ", "compiler-version ", "arch ", "option ",
                                       "kernel-abi "};
      const char *kind = "descriptor";
      for (size_t i = 0; i < sizeof fp / sizeof fp[0]; i++)
        if (strncmp(a, fp[i], strlen(fp[i])) == 0 || strncmp(b, fp[i], strlen(fp[i])) == 0)
          kind = "target fingerprint";
      snprintf(out, cap, "%s mismatch: entry has \"%.*s\" where \"%.*s\" was asked for", kind,
               (int)(lb > 120 ? 120 : lb), b, (int)(la > 120 ? 120 : la), a);
      return;
    }
    a += la + (ea ? 1 : 0);
    b += lb + (eb ? 1 : 0);
  }
  snprintf(out, cap, "descriptor mismatch");
}

bool kiln__kcache_disk_load(kiln_kcache *kc, const char *hex, const char *canonical,
                            kiln_kimage_kind kind, void **out_image, size_t *out_size) {
  int dirfd = kiln__kcache_folder_fd(kc);
  if (dirfd < 0) return false;
  char name[48];
  snprintf(name, sizeof name, "%s.kk", hex);
  char *buf = NULL;
  size_t size = 0;
  bool absent;
  kiln_status st = read_entry(dirfd, name, &buf, &size, &absent);
  char why[400] = "";
  char *have = NULL;
  void *image = NULL;
  size_t isize = 0;
  kiln_kimage_kind hkind = KILN_KIMAGE_PTX;
  if (st) {
    if (!absent) snprintf(why, sizeof why, "%s", kiln_status_message(st));
  } else {
    kiln_status dst = kiln__kcache_entry_decode(buf, size, &have, &hkind, &image, &isize);
    if (dst) {
      snprintf(why, sizeof why, "%s", kiln_status_message(dst));
      kiln_status_free(dst);
    } else if (strcmp(have, canonical) != 0) {
      first_difference(canonical, have, why, sizeof why);
    } else if (hkind != kind) {
      snprintf(why, sizeof why, "image is %s, the compiler makes %s",
               kiln_kimage_kind_name(hkind), kiln_kimage_kind_name(kind));
    }
  }
  kiln_status_free(st);
  free(buf);
  free(have);
  if (absent) return false;
  if (why[0]) {
    free(image);
    pthread_mutex_lock(&kc->mu);
    kc->stats.discarded++;
    pthread_mutex_unlock(&kc->mu);
    kiln__kcache_logf(kc, 1, "kernel cache: discarding %s/%s: %s; rebuilding it", kc->dir, name,
                      why);
    return false;
  }
  *out_image = image;
  *out_size = isize;
  return true;
}

void kiln__kcache_disk_store(kiln_kcache *kc, const char *hex, const char *canonical,
                             kiln_kimage_kind kind, const void *image, size_t size) {
  int dirfd = kiln__kcache_folder_fd(kc);
  if (dirfd < 0) return;
  char name[48], tmp[96];
  snprintf(name, sizeof name, "%s.kk", hex);
  char *buf = NULL;
  size_t len = 0;
  const char *fail = NULL;
  int err = 0;
  kiln_status st = kiln__kcache_entry_encode(canonical, kind, image, size, &buf, &len);
  if (st) {
    kiln__kcache_logf(kc, 1, "kernel cache: not writing %s/%s: %s", kc->dir, name,
                      kiln_status_message(st));
    kiln_status_free(st);
    pthread_mutex_lock(&kc->mu);
    kc->stats.write_failures++;
    pthread_mutex_unlock(&kc->mu);
    return;
  }
  /* Locked from creation until after the rename (kcache_tmp.c): killed
   * anywhere in between, this process leaves a file that is swept. */
  int fd = kiln__kcache_tmp_create(kc, dirfd, hex, tmp);
  if (fd < 0) {
    fail = "create";
    err = errno;
  } else {
    size_t done = 0;
    while (done < len) {
      ssize_t w = write(fd, buf + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        fail = "write";
        err = w < 0 ? errno : ENOSPC;
        break;
      }
      done += (size_t)w;
    }
    if (!fail && renameat(dirfd, tmp, dirfd, name) != 0) {
      fail = "rename";
      err = errno;
    }
    if (fail) unlinkat(dirfd, tmp, 0);
    if (close(fd) != 0 && !fail) {
      /* the rename is done: the entry is in place, and a bad one is
       * refused by its checksum when read */
      fail = "close";
      err = errno;
    }
  }
  free(buf);
  pthread_mutex_lock(&kc->mu);
  if (fail) kc->stats.write_failures++;
  else kc->stats.disk_writes++;
  pthread_mutex_unlock(&kc->mu);
  if (fail)
    kiln__kcache_logf(kc, 1, "kernel cache: cannot write %s/%s (%s: %s); kernel kept in memory",
                      kc->dir, name, fail, strerror(err));
}
