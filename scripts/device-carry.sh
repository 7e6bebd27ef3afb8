# device-carry.sh — sourced by device-build.sh and device-cli.sh: packing binaries for a GPU machine
# and finding its CUDA libraries there.

# carry_pack FILE...: a fresh .carry/ with the FILEs and, in .carry/lib, the shared libraries they
# link that a CUDA image may lack (HDF5, jansson, libyaml, libaec/libsz, ...); cuBLAS, cudart, libc
# and libstdc++ are the image's own.
carry_pack() {
    rm -rf .carry && mkdir -p .carry/lib
    cp "$@" .carry/
    for lib in $(for f in "$@"; do ldd ".carry/$(basename "$f")"; done | awk '/=> \// {print $3}' | sort -u); do
        case "$(basename "$lib")" in
            libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
            libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*) ;;
            *) cp -L "$lib" .carry/lib/ ;;
        esac
    done
    du -sh .carry
}

# cuda_lib_path: the CUDA image's library folders put in front of LD_LIBRARY_PATH
cuda_lib_path() {
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -d "$d" ] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
    done
    return 0
}
