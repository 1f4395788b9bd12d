/* lockbench clock shim: LD_PRELOAD'ed into a server so a chaos fault can move its wall clock.
 *
 * Only CLOCK_REALTIME (and its coarse variant), gettimeofday() and time() are changed; the
 * monotonic clocks stay true, as they do when NTP steps a real machine's clock.
 * The harness writes the control file named by LOCKBENCH_CLOCK_FILE (4 x int64, little endian):
 *   [0] sequence: odd while the harness is writing (a seqlock: readers retry)
 *   [1] anchor:   real CLOCK_REALTIME ns at which the change was applied
 *   [2] offset:   ns added at the anchor (a jump)
 *   [3] rate:     clock speed in parts per million after the anchor (1000000 = real time)
 * No malloc, no dlsym: the clock is read with the raw syscall, so the shim is safe to call
 * from anywhere (libfaketime's recursion through dlsym hangs Debian's redis-server). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *control;
static int initialised;

static int real_clock(clockid_t id, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static void init(void) {
    if (__atomic_exchange_n(&initialised, 1, __ATOMIC_ACQ_REL)) return;
    const char *path = getenv("LOCKBENCH_CLOCK_FILE");
    if (!path) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void *m = mmap(0, 4 * sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED) control = m;
}

static int64_t now_ns(void) {
    struct timespec t;
    real_clock(CLOCK_REALTIME, &t);
    int64_t real = (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
    init();
    if (!control) return real;
    int64_t seq, anchor, offset, ppm;
    do {
        seq = __atomic_load_n(&control[0], __ATOMIC_ACQUIRE);
        anchor = control[1];
        offset = control[2];
        ppm = control[3];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while ((seq & 1) || seq != __atomic_load_n(&control[0], __ATOMIC_ACQUIRE));
    if (anchor == 0) return real; /* never changed */
    if (ppm <= 0) ppm = 1000000;
    return anchor + (int64_t)((__int128)(real - anchor) * ppm / 1000000) + offset;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    if (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE) return real_clock(id, ts);
    int64_t n = now_ns();
    ts->tv_sec = n / 1000000000LL;
    ts->tv_nsec = n % 1000000000LL;
    return 0;
}

/* glibc declares tv nonnull, but the kernel accepts NULL and so must we. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    if (!tv) return 0;
    int64_t n = now_ns();
    tv->tv_sec = n / 1000000000LL;
    tv->tv_usec = (n % 1000000000LL) / 1000;
    return 0;
}

time_t time(time_t *out) {
    time_t s = (time_t)(now_ns() / 1000000000LL);
    if (out) *out = s;
    return s;
}
