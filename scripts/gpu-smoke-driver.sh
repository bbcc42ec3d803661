set -x
cd $PWD
meson setup build-gpu -Dtoolkit_dir=/usr/local/cuda >/tmp/b.log 2>&1 || tail -20 /tmp/b.log
ninja -C build-gpu interpose/libdsmemtrace.so >>/tmp/b.log 2>&1 || tail -30 /tmp/b.log
ninja -C build-gpu decode/dsmemdecode >>/tmp/b.log 2>&1 || echo "decoder build failed (WIP)"
export DSMT_GPU_NO_BUILD=1 DSMT_GPU_RESULTS=$OUT/drv DSMT_GPU_STEPS=6
timeout 500 bash tests/gpu/run_driver.sh build-gpu
cp /tmp/b.log $OUT/
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
cd $OUT && tar czf drv.tgz drv && rm -rf drv
