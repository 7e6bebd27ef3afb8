/* cuda_link.cu — deliberately empty. The kernels of libnd_cuda are compiled by custom targets
 * (kernels/cuda/meson.build: nvcc writes their header dependencies); this one file is compiled by
 * meson itself so that libnd_cuda remains a CUDA library and every program linking it is linked
 * by nvcc, as before. */
