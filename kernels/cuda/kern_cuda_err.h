/*
 * kern_cuda_err.h -- the error codes of kernels/cuda (pl_err.h range
 * -1000): every kern_cuda_* function that can fail returns 0 or one of
 * these, with a message in the caller's (err, errlen) where it takes one.
 */
#ifndef KERN_CUDA_ERR_H
#define KERN_CUDA_ERR_H

#define KERN_CUDA_EINVAL (-1001) /* bad argument or unsupported shape */
#define KERN_CUDA_ENOMEM (-1002) /* device or pinned host memory exhausted */
#define KERN_CUDA_ENODEV (-1010) /* no CUDA device visible */
#define KERN_CUDA_EFAIL (-1011)  /* a CUDA, cuBLAS or comparison failure */

#endif
