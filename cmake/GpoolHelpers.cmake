# Shared build settings and helpers: gpool_add_library(), gpool_add_test(), gpool_add_bench().

set(GPOOL_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough -Wformat=2)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports -Wrestrict false positives inside libstdc++'s std::string operator+ at -O2/-O3
  # (GCC bug 105329, fixed in 13); they are not in our code.
  list(APPEND GPOOL_WARNING_FLAGS -Wno-restrict)
endif()
if(GPOOL_WERROR)
  list(APPEND GPOOL_WARNING_FLAGS -Werror)
endif()

# LLVM's linker when the machine has it (Debian: lld, installed by scripts/install-deps.sh): the
# test binaries link large static libraries; under ASan with line tables one link took 21.7 s
# with GNU ld and 4.4 s with lld, and the sanitized build's links 159 s of CPU, 80 s with lld
# (2026-12-05).
# GPOOL_LINKER=default keeps the toolchain's own.
set(GPOOL_LINKER "lld" CACHE STRING "Linker for -fuse-ld= (lld, gold, bfd, or default)")
if(NOT GPOOL_LINKER STREQUAL "default")
  find_program(GPOOL_LINKER_PROGRAM NAMES ld.${GPOOL_LINKER})
  if(GPOOL_LINKER_PROGRAM)
    add_link_options(-fuse-ld=${GPOOL_LINKER})
  else()
    message(STATUS "ld.${GPOOL_LINKER} not found; linking with the toolchain's default linker")
  endif()
endif()

if(GPOOL_ENABLE_ASAN AND GPOOL_ENABLE_TSAN)
  message(FATAL_ERROR "GPOOL_ENABLE_ASAN and GPOOL_ENABLE_TSAN are mutually exclusive")
endif()
if(GPOOL_ENABLE_ASAN)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(GPOOL_ENABLE_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # TSan does not model std::atomic_thread_fence (GCC: -Wtsan), which Asio's fenced blocks use
  # around handler invocation; its scheduler hands operations over under a mutex, which TSan
  # does see, so the fences are dropped from the sanitized build instead of being reported.
  add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
endif()
# The libFuzzer build (preset fuzz): every library is compiled with coverage instrumentation for
# libFuzzer and with ASan+UBSan; only the fuzz targets (tests/fuzz) link libFuzzer's main.
if(GPOOL_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GPOOL_BUILD_FUZZ needs clang (preset fuzz uses clang++-14)")
  endif()
  if(GPOOL_ENABLE_ASAN OR GPOOL_ENABLE_TSAN)
    message(FATAL_ERROR "GPOOL_BUILD_FUZZ brings its own sanitizers; leave GPOOL_ENABLE_ASAN/TSAN off")
  endif()
  # Less UBSan's `function` check (calls through a function pointer of another type): clang 14
  # cannot emit its prologue data for the split parts of a C++20 coroutine ("Cannot represent a
  # difference across sections" in server.cc and client.cc).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function
                      -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# Boost 1.74's Asio recognises C++20 coroutines only with GCC (clang: only the coroutines TS of
# libc++); clang 14 has them too, with libstdc++'s <coroutine>.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT=1 BOOST_ASIO_HAS_STD_COROUTINE=1)
endif()
# True when the build carries a sanitizer runtime; tests that LD_PRELOAD our own libraries into
# other programs cannot run then (the sanitizer runtime must come first) and are skipped.
if(GPOOL_ENABLE_ASAN OR GPOOL_ENABLE_TSAN OR GPOOL_BUILD_FUZZ)
  set(GPOOL_SANITIZED ON)
else()
  set(GPOOL_SANITIZED OFF)
endif()

# gpool_add_library(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# A static library for one component folder. Its include root is src/, so headers are
# included as "common/status.h".
function(gpool_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${GPOOL_WARNING_FLAGS})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# gpool_add_test(NAME SOURCES ... [DEPS ...] [LABELS ...] [SERIAL])
# One GoogleTest binary registered with CTest (each TEST becomes its own CTest case). The label
# `tsan` marks the tests of the threaded parts: target gpool_tsan_tests builds just those, and
# the CI's ThreadSanitizer phase runs them (ctest -L tsan). SERIAL
# makes CTest run its cases alone, for tests that measure how a shared resource (a simulated
# GPU's busy time) is divided and would be skewed by another test competing for the CPUs.
function(gpool_add_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # A build that will not run these tests (GPOOL_SKIP_TEST_LABELS, e.g. the sanitized CI build,
  # which runs `ctest -LE "no_sanitizer|slow"`) keeps the target, so that dependencies on it
  # still resolve, but neither builds nor registers it.
  foreach(label IN LISTS ARG_LABELS)
    if(label IN_LIST GPOOL_SKIP_TEST_LABELS)
      set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
      return()
    endif()
  endforeach()
  if(GPOOL_UNITY_TESTS)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  endif()
  target_compile_options(${name} PRIVATE ${GPOOL_WARNING_FLAGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    GPOOL_SOURCE_DIR="${PROJECT_SOURCE_DIR}" GPOOL_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(props ENVIRONMENT "GPOOL_SANITIZED=$<BOOL:${GPOOL_SANITIZED}>")
  if(ARG_LABELS)
    # gtest_discover_tests flattens its PROPERTIES through a generated script several times, so
    # a CMake list of labels loses all but the first. Several labels are therefore joined into
    # one ("no_sanitizer,slow"); ctest's -L/-LE take regular expressions, so `-L slow` and
    # `-LE "no_sanitizer|slow"` still match it.
    string(REPLACE ";" "," labels_joined "${ARG_LABELS}")
    list(APPEND props LABELS "${labels_joined}")
  endif()
  if(ARG_SERIAL)
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  if("tsan" IN_LIST ARG_LABELS AND TARGET gpool_tsan_tests)
    add_dependencies(gpool_tsan_tests ${name})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ${props})
endfunction()

# gpool_add_test_library(NAME SOURCES ... DEPS ...)
# Helpers shared by several test binaries (fixtures, utilities), compiled once instead of once
# per binary. Include roots src/ and tests/, like the tests.
function(gpool_add_test_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${GPOOL_WARNING_FLAGS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# gpool_add_bench(NAME SOURCES ... [DEPS ...])
function(gpool_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${GPOOL_WARNING_FLAGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  target_compile_definitions(${name} PRIVATE GPOOL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()

if(GPOOL_BUILD_TESTS)
  include(GoogleTest)
endif()

add_compile_definitions(GPOOL_VERSION="${PROJECT_VERSION}")
