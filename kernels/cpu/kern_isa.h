/*
 * kern_isa.h -- which instruction set the CPU kernels run with.
 *
 * Purpose.  One portable binary carries every kernel variant (each compiled
 * with per-function target attributes); the variant is chosen at run time
 * from what the CPU and the operating system support:
 *
 *   KERN_ISA_SCALAR      portable C, the reference every other path is tested against
 *   KERN_ISA_AVX2        AVX2 + FMA + F16C
 *   KERN_ISA_AVX512VNNI  AVX-512 F/BW/VL + VNNI (vpdpbusd)
 *   KERN_ISA_AMX         AMX-TILE + AMX-INT8 (plus the AVX-512 level for epilogues)
 *
 * Levels are ordered: a CPU that supports a level supports every lower one
 * (AMX is only reported when AVX-512 VNNI is also usable).  Detection reads
 * cpuid, checks that the OS saves the needed register state (xgetbv: YMM for
 * AVX2, opmask/ZMM for AVX-512, tile config/data for AMX) and, for AMX on
 * Linux, asks the kernel for permission to use tile data
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); a refusal lowers the
 * level to AVX-512 VNNI.
 *
 * Forcing a lower level.  The environment variable PARLEY_ISA (scalar, avx2,
 * avx512vnni, amx) or kern_isa_set_max() caps the level used (for tests and
 * comparisons); a cap above what the machine supports is ignored (the
 * machine's best is used).  kern_isa_best() = min(detected, cap).
 *
 * Threading.  Detection runs once (thread-safe, cached); kern_isa_set_max
 * should be called before compute starts (it is an atomic store, kernels
 * pick it up on their next call).  No failure modes except the documented
 * parse error.
 */
#ifndef KERN_ISA_H
#define KERN_ISA_H

#include "pl_err.h"

/* Error codes of kernels/cpu (the -1800 range of pl_err.h): the packers,
 * probes and pool return these (with a message where they take one). */
#define KERN_EINVAL PL_ERR_CODE(PL_ERR_KERN, PL_EINVAL) /* bad shape, value or argument */
#define KERN_ENOMEM PL_ERR_CODE(PL_ERR_KERN, PL_ENOMEM) /* allocation failed */
#define KERN_ESYS PL_ERR_CODE(PL_ERR_KERN, PL_EIO)      /* threads could not be started */

typedef enum {
    KERN_ISA_SCALAR = 0,
    KERN_ISA_AVX2 = 1,
    KERN_ISA_AVX512VNNI = 2,
    KERN_ISA_AMX = 3,
} kern_isa;

#define KERN_ISA_COUNT 4

/* Best level this CPU + OS supports (ignores any cap). */
kern_isa kern_isa_detect(void);
/* Level the kernels use: min(kern_isa_detect(), cap from PARLEY_ISA / kern_isa_set_max). */
kern_isa kern_isa_best(void);
/* Cap the level (KERN_ISA_AMX removes the cap). */
void kern_isa_set_max(kern_isa max);
/* "scalar", "avx2", "avx512vnni", "amx". */
const char *kern_isa_name(kern_isa isa);
/* Parse a name as above; returns 0, or KERN_EINVAL for an unknown name (*out
 * untouched). */
int kern_isa_parse(const char *name, kern_isa *out);

#endif
