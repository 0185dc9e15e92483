# `cpack -G DEB` in the build folder: a Debian package of what
# `cmake --install` installs, under /usr. With BENCHD_TORCH_RUNTIME=bundle
# (the default) it carries LibTorch and the CUDA wheels' libraries (about
# 3.6 GB unpacked), so it needs nothing from PyPI on the node; with a torch
# installation's folder it carries only benchd's own files and the worker
# loads LibTorch from that folder, which must exist on the node.
set(CPACK_PACKAGE_NAME benchd)
set(CPACK_PACKAGE_VENDOR "benchd")
set(CPACK_PACKAGE_CONTACT "benchd developers <benchd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU benchmarking and profiling daemon (benchd, benchd-worker, benchctl)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# The Debian libraries the programs link: the Containerfile's runtime stage
# installs the same list, and tests/install checks both against what ldd
# finds. (Not dpkg-shlibdeps: it would also scan the bundled CUDA libraries,
# which need the driver's libcuda.so.1 that no package owns.)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libgrpc++1.51, libprotobuf32, libabsl20220623, libsqlite3-0, libprometheus-cpp-core1.0, libprometheus-cpp-pull1.0, libjemalloc2, libssl3, libfmt9, python3, python3-grpcio")
# zstd (dpkg has read it since Debian 12): gzip took minutes over the bundled
# libraries.
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
set(CPACK_THREADS 0)
set(CPACK_GENERATOR DEB)
include(CPack)
