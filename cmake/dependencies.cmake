# Every third-party dependency comes from a Debian package; scripts/setup.sh installs
# them. A missing one stops the configure step with the package to install.
find_package(PkgConfig)

macro(ds_require_pkgconfig var module package)
  if(NOT PKG_CONFIG_FOUND)
    message(FATAL_ERROR "pkg-config not found: install it with `apt-get install pkg-config` "
                        "(or run scripts/setup.sh)")
  endif()
  pkg_check_modules(${var} QUIET IMPORTED_TARGET ${module})
  if(NOT ${var}_FOUND)
    message(FATAL_ERROR "Missing dependency ${module}: install the Debian package ${package} "
                        "(`apt-get install ${package}`, or run scripts/setup.sh)")
  endif()
endmacro()

macro(ds_require_config name target package)
  find_package(${name} CONFIG QUIET)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "Missing dependency ${name}: install the Debian package ${package} "
                        "(`apt-get install ${package}`, or run scripts/setup.sh)")
  endif()
endmacro()

find_package(Threads REQUIRED)
ds_require_pkgconfig(SYSTEMD libsystemd libsystemd-dev)
ds_require_pkgconfig(HWLOC hwloc libhwloc-dev)
ds_require_pkgconfig(PCRE2 libpcre2-8 libpcre2-dev)
ds_require_pkgconfig(ICU icu-uc libicu-dev)
ds_require_config(nlohmann_json nlohmann_json::nlohmann_json nlohmann-json3-dev)
ds_require_config(spdlog spdlog::spdlog libspdlog-dev)
if(DS_WITH_ONEDNN)
  # Debian's package config also needs OpenCL headers (ocl-icd-opencl-dev): setup.sh --onednn.
  ds_require_config(dnnl DNNL::dnnl "libdnnl-dev ocl-icd-opencl-dev")
endif()

if(DS_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "Missing dependency GoogleTest: install libgtest-dev (or run scripts/setup.sh)")
  endif()
endif()
if(DS_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    message(FATAL_ERROR "Missing dependency Google Benchmark: install libbenchmark-dev "
                        "(or run scripts/setup.sh), or configure with -DDS_BUILD_BENCH=OFF")
  endif()
endif()
