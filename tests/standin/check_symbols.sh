#!/bin/sh
# Linkage facts of the stand-ins that must match the real libraries.
# usage: check_symbols.sh READELF STANDIN_LIBDIR
set -u
readelf=$1 dir=$2 fail=0
no() { echo "check_symbols: FAILED: $*" >&2; fail=1; }
dyn() { "$readelf" -dW "$dir/$1"; }
syms() { "$readelf" --dyn-syms -W "$dir/$1"; }

dyn libcuda.so.1 | grep -q 'SONAME.*\[libcuda\.so\.1\]' || no "libcuda.so.1 soname"
syms libcuda.so.1 | grep -qE ' cuGetProcAddress_v2$' || no "libcuda.so.1 exports cuGetProcAddress_v2 (unversioned)"
syms libcuda.so.1 | grep -qE ' cuMemAlloc_v2$' || no "libcuda.so.1 exports cuMemAlloc_v2"

dyn libcudart.so.13 | grep -q 'SONAME.*\[libcudart\.so\.13\]' || no "libcudart soname"
dyn libcudart.so.13 | grep -q 'NEEDED.*libcuda\.so' && no "libcudart must not link libcuda (dlopen only)"
syms libcudart.so.13 | grep -qE ' cudaMalloc@@libcudart\.so\.13$' || no "cudaMalloc@@libcudart.so.13"
syms libcudart.so.13 | grep -qE ' cudaFree@@libcudart\.so\.13$' || no "cudaFree@@libcudart.so.13"
syms libcudart.so.13 | awk '$5=="GLOBAL" && $7!="UND" {print $8}' | grep -vE '^(cuda[A-Za-z0-9_]*@@libcudart\.so\.13|libcudart\.so\.13)$' \
	| grep . && no "libcudart exports something besides cuda*"

syms libc10.so | grep -qE ' _ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE$' || no "libc10 exports the report"
syms libc10.so | grep -qE ' _ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE$' || no "libc10 exports the OOM report"
dyn libc10_cuda.so | grep -q 'NEEDED.*\[libc10\.so\]' || no "libc10_cuda NEEDED libc10.so"
dyn libc10_cuda.so | grep -q 'NEEDED.*\[libcudart\.so\.13\]' || no "libc10_cuda NEEDED libcudart.so.13"
syms libc10_cuda.so | grep -E 'UND ' | grep -qE ' cudaMalloc@libcudart\.so\.13' || no "libc10_cuda imports cudaMalloc@libcudart.so.13"
syms libc10_cuda.so | grep -E 'UND ' | grep -q '_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE' || no "libc10_cuda imports the report"
dyn libtorchstub.so | grep -q 'NEEDED.*\[libc10_cuda\.so\]' || no "libtorchstub NEEDED libc10_cuda.so"
[ $fail = 0 ] && echo "check_symbols: ok"
exit $fail
