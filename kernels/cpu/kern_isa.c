/*
 * kern_isa.c -- run-time choice of the CPU kernels' instruction set (see
 * kern_isa.h for the contract).
 *
 * Detection runs once per process (pthread_once): cpuid says what the CPU
 * implements, xgetbv(0) says which register state the OS saves on a context
 * switch (an instruction set whose registers the OS does not save must not
 * be used even if the CPU has it), and on Linux the AMX tile data state must
 * additionally be requested per process with arch_prctl(ARCH_REQ_XCOMP_PERM)
 * (kernel 5.16+); without that grant the first tile instruction faults, so a
 * refusal lowers the level to AVX-512 VNNI.  The cap (PARLEY_ISA, read once
 * during detection, or kern_isa_set_max) is a separate atomic so that tests
 * can move it at any time; kern_isa_best() combines the two.
 */
#include "kern_isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define KERN_ISA_X86 1
#else
#define KERN_ISA_X86 0
#endif

#if KERN_ISA_X86 && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define KERN_ARCH_REQ_XCOMP_PERM 0x1023 /* asm/prctl.h, not exported by every libc */
#define KERN_XFEATURE_XTILEDATA 18      /* XCR0 bit of the AMX tile data state */
#endif

#define KERN_ISA_NO_CAP (-1) /* kern_isa_cap before PARLEY_ISA / kern_isa_set_max set it */

static pthread_once_t kern_isa_once = PTHREAD_ONCE_INIT; /* guards kern_isa_detected */
static kern_isa kern_isa_detected = KERN_ISA_SCALAR;     /* written once under kern_isa_once */
static atomic_int kern_isa_cap = KERN_ISA_NO_CAP;        /* cap in force, or KERN_ISA_NO_CAP */

static const char *const kern_isa_names[KERN_ISA_COUNT] = {"scalar", "avx2", "avx512vnni", "amx"};

#if KERN_ISA_X86
/* XCR0: which register states the OS enabled (valid only when OSXSAVE is set). */
static unsigned long long kern_isa_xcr0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* Ask the OS for the AMX tile data state; 1 when it may be used. */
static int kern_isa_amx_permit(void) {
#if defined(__linux__)
    return syscall(SYS_arch_prctl, KERN_ARCH_REQ_XCOMP_PERM, KERN_XFEATURE_XTILEDATA) == 0;
#else
    return 1; /* no per-process opt-in outside Linux: XCR0 alone decides */
#endif
}

static kern_isa kern_isa_probe(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return KERN_ISA_SCALAR;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx || !fma || !f16c) return KERN_ISA_SCALAR;
    unsigned long long xcr0 = kern_isa_xcr0();
    if ((xcr0 & 0x6) != 0x6) return KERN_ISA_SCALAR; /* XMM + YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return KERN_ISA_SCALAR;
    if (!((b >> 5) & 1)) return KERN_ISA_SCALAR; /* AVX2 */
    int avx512 = ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1);
    if (!avx512 || (xcr0 & 0xE0) != 0xE0) return KERN_ISA_AVX2; /* F/BW/VL/VNNI; opmask+ZMM state */
    int amx = ((d >> 24) & 1) && ((d >> 25) & 1);               /* AMX-TILE, AMX-INT8 */
    if (!amx || (xcr0 & 0x60000ull) != 0x60000ull)
        return KERN_ISA_AVX512VNNI; /* TILECFG+TILEDATA */
    return kern_isa_amx_permit() ? KERN_ISA_AMX : KERN_ISA_AVX512VNNI;
}
#endif

static void kern_isa_init(void) {
#if KERN_ISA_X86
    kern_isa_detected = kern_isa_probe();
#endif
    kern_isa cap;
    const char *env = getenv("PARLEY_ISA");
    if (env && kern_isa_parse(env, &cap) == 0) {
        int none = KERN_ISA_NO_CAP; /* an earlier kern_isa_set_max wins over the environment */
        atomic_compare_exchange_strong(&kern_isa_cap, &none, (int)cap);
    }
}

kern_isa kern_isa_detect(void) {
    pthread_once(&kern_isa_once, kern_isa_init);
    return kern_isa_detected;
}

kern_isa kern_isa_best(void) {
    kern_isa d = kern_isa_detect();
    int cap = atomic_load_explicit(&kern_isa_cap, memory_order_relaxed);
    return cap != KERN_ISA_NO_CAP && cap < (int)d ? (kern_isa)cap : d;
}

void kern_isa_set_max(kern_isa max) {
    int v = (int)max;
    if (v < KERN_ISA_SCALAR) v = KERN_ISA_SCALAR;
    if (v > KERN_ISA_AMX) v = KERN_ISA_AMX;
    atomic_store(&kern_isa_cap, v);
}

const char *kern_isa_name(kern_isa isa) {
    return (int)isa >= 0 && (int)isa < KERN_ISA_COUNT ? kern_isa_names[isa] : "unknown";
}

int kern_isa_parse(const char *name, kern_isa *out) {
    if (!name) return KERN_EINVAL;
    for (int i = 0; i < KERN_ISA_COUNT; i++)
        if (strcasecmp(name, kern_isa_names[i]) == 0) {
            *out = (kern_isa)i;
            return 0;
        }
    return KERN_EINVAL;
}
