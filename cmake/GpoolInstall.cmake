# Installation rules and the Debian package (CPack). docs/admin-guide.md.
#
# Layout (prefix /usr, the default here and the package's):
#   bin/gpoold gpool gpool-agent gpool-supervisor gpool-gpu-probe   all in ONE folder: gpool-agent
#                                   finds gpool-supervisor beside itself and `gpool up` finds the
#                                   daemons beside `gpool`
#   lib/gpool/libgpool-vgpu.so      the interposer (only when the CUDA headers were found)
#   lib/gpool/gpool-adopt           the PAM account hook for SSH logins (pam_exec)
#   share/gpool/fixtures/*.json     simulated GPU servers (gpool-agent --fake-fixture, gpool up)
#   share/gpool/traces/             the bundled cluster traces for `gpool sim` (about 16 MiB,
#                                   2.5 MiB in the package); GPOOL_INSTALL_TRACES=OFF leaves them out
#   share/gpool/examples/           gpoold.toml, gpool-agent.default and gpool-agent.toml
#   share/gpool/web/                the dashboard's files (gpoold serves them at /)
#   share/doc/gpool/                README and docs/*.md
#   lib/systemd/system/             gpoold.service, gpool-agent.service
#   /etc/gpool/gpoold.toml, /etc/default/gpool-agent   configuration (dpkg conffiles)
#
# /etc is absolute whatever the prefix (GPOOL_INSTALL_SYSCONFDIR; the units read their files
# there). A staged `cmake --install` therefore needs DESTDIR (DESTDIR=/tmp/root cmake --install
# build/release), or it writes /etc.

if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  set(CMAKE_INSTALL_PREFIX "/usr" CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

option(GPOOL_INSTALL_TRACES "Install the bundled cluster traces (data/traces)" ON)

set(GPOOL_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/gpool")
set(GPOOL_INSTALL_LIBDIR "lib/gpool")  # not multiarch: `gpool up` looks in ../lib/gpool
set(GPOOL_INSTALL_SYSCONFDIR "/etc" CACHE PATH
    "Where gpool/gpoold.toml and default/gpool-agent are installed (absolute; the units read them there)")
set(GPOOL_INSTALL_UNITDIR "lib/systemd/system")

# Programs: install only the ones this configuration builds (gpool-agent needs src/net).
foreach(program gpoold gpool gpool-agent gpool-supervisor gpool-gpu-probe)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
if(TARGET gpool_vgpu)
  install(TARGETS gpool_vgpu LIBRARY DESTINATION ${GPOOL_INSTALL_LIBDIR})
endif()
# The PAM account hook (pam_exec), not a command for users: beside the interposer.
install(TARGETS gpool-adopt RUNTIME DESTINATION ${GPOOL_INSTALL_LIBDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/gpu/fixtures/
        DESTINATION ${GPOOL_INSTALL_DATADIR}/fixtures
        FILES_MATCHING PATTERN "*.json")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/web/ DESTINATION ${GPOOL_INSTALL_DATADIR}/web
        FILES_MATCHING PATTERN "*.html" PATTERN "*.js" PATTERN "*.css")
if(GPOOL_INSTALL_TRACES)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/traces/ DESTINATION ${GPOOL_INSTALL_DATADIR}/traces)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/gpoold.toml
              ${PROJECT_SOURCE_DIR}/deploy/config/gpool-agent.default
              ${PROJECT_SOURCE_DIR}/deploy/config/gpool-agent.toml
        DESTINATION ${GPOOL_INSTALL_DATADIR}/examples)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/gpoold.toml
        DESTINATION ${GPOOL_INSTALL_SYSCONFDIR}/gpool)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/gpool-agent.default
        DESTINATION ${GPOOL_INSTALL_SYSCONFDIR}/default RENAME gpool-agent)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/gpoold.service
              ${PROJECT_SOURCE_DIR}/deploy/systemd/gpool-agent.service
        DESTINATION ${GPOOL_INSTALL_UNITDIR})

# Shell completion where Debian's bash-completion and zsh look for a package's scripts.
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/gpool.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gpool)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/_gpool
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)

file(GLOB gpool_doc_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${gpool_doc_pages}
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- Debian package --------------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "gpool")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "gpool")
set(CPACK_PACKAGE_CONTACT "gpool maintainers <gpool@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "pools the GPUs of many Linux servers")
set(CPACK_PACKAGE_DESCRIPTION
    "gpool shares the GPUs of several servers between users: whole GPUs and fractional\n"
    "slices, queues, quotas and fair share. This package holds the controller (gpoold),\n"
    "the node agent (gpool-agent), the gpool command, the interposer and systemd units.")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
# The absolute /etc destinations land in the package's root, not on the build machine
# (CPACK_SET_DESTDIR); the prefix is then CPACK_INSTALL_PREFIX, whatever the build tree's.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "/usr")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")  # gpool_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_COMPRESSION_TYPE "xz")
# Library dependencies from the binaries themselves (dpkg-shlibdeps: libsqlite3-0, libpq5,
# libssl3, libfmt9, libspdlog1.10, libstdc++6, libc6, ...); the hand-written list is the fallback
# for a machine without dpkg-dev, from scripts/install-deps.sh's runtime libraries.
# adduser: postinst creates the `gpool` system user; procps, util-linux: the agent's process and
# mount checks. CPack appends what dpkg-shlibdeps finds to this list.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, procps, util-linux")
find_program(GPOOL_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(GPOOL_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS
         ", libc6 (>= 2.36), libstdc++6 (>= 12), libgcc-s1, libsqlite3-0, libpq5, libssl3,"
         " libfmt9, libspdlog1.10-fmt9, libtomlplusplus3")
endif()
# sqlite3 for `.backup`, curl for checks by hand over the socket.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "sqlite3, curl")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/deploy/debian/postinst;${PROJECT_SOURCE_DIR}/deploy/debian/prerm;${PROJECT_SOURCE_DIR}/deploy/debian/postrm;${PROJECT_SOURCE_DIR}/deploy/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
