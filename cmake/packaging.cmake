# Installation (`cmake --install`) and the packages (CPack): the Debian package, the RPM and a
# relocatable tarball. scripts/package.sh builds all three, scripts/package-check.sh checks them
# and runs their binary on the simulator.
#
#   bin/gpureap
#   <libdir>/gpureap/gpureap-http.so          the HTTP module `export`, `fleet` and `watch` (--listen,
#                                             a webhook) load (cpp-httplib)
#   share/man/man1/gpureap.1.gz, gpureap-{ps,kill,doctor,run,reap,watch,export,fleet,top}.1.gz   from the binary's --help
#   share/bash-completion/completions/gpureap
#   share/zsh/<zsh dir>/_gpureap
#   share/doc/gpureap/README.md, docs/*.md (the user's documents), examples/config.toml,
#   examples/{slurm,kubernetes,systemd,prometheus}/ (deploy/: the Slurm epilog and prolog, notes,
#   units, the exporter's DaemonSet, Prometheus rules and a Grafana dashboard),
#   examples/watch-policy.toml (gpureap watch's policy, every key explained)
#
# The layouts differ in two directories only, chosen when the files are installed (cpack runs
# the install once per package; scripts/package.sh sets GPUREAP_PACKAGE_LAYOUT for each):
#   layout    <libdir>                       <zsh dir>           prefix
#   deb       lib/<multiarch> (GNUInstallDirs) vendor-completions  /usr   (also a plain cmake --install)
#   rpm       lib64                          site-functions      /usr
#   tarball   lib                            site-functions      gpureap-<version>-linux-x86_64/
# gpureap finds its module under each of these, relative to its own executable (http_module.cpp).
#
# The simulator (sim/) is a test fixture and is never installed.

include(GNUInstallDirs)
set(GPUREAP_PACKAGING_DIR ${PROJECT_SOURCE_DIR}/packaging)

# The layout's two directories, as variables of the install script (escaped below: read when
# the files are installed, not when the project is configured).
install(CODE "
  set(gpureap_layout \"\$ENV{GPUREAP_PACKAGE_LAYOUT}\")
  if(gpureap_layout STREQUAL \"\" OR gpureap_layout STREQUAL \"deb\")
    set(gpureap_libdir \"${CMAKE_INSTALL_LIBDIR}\")
    set(gpureap_zshdir vendor-completions)
  elseif(gpureap_layout STREQUAL \"rpm\")
    set(gpureap_libdir lib64)
    set(gpureap_zshdir site-functions)
  elseif(gpureap_layout STREQUAL \"tarball\")
    set(gpureap_libdir lib)
    set(gpureap_zshdir site-functions)
  else()
    message(FATAL_ERROR \"GPUREAP_PACKAGE_LAYOUT=\${gpureap_layout}: use deb, rpm or tarball\")
  endif()")
install(TARGETS gpureap RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS gpureap_http_module LIBRARY DESTINATION "\${gpureap_libdir}/gpureap")  # where gpureap looks
install(FILES ${GPUREAP_PACKAGING_DIR}/completions/gpureap.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gpureap)
install(FILES ${GPUREAP_PACKAGING_DIR}/completions/_gpureap
        DESTINATION "${CMAKE_INSTALL_DATADIR}/zsh/\${gpureap_zshdir}")
install(FILES ${GPUREAP_PACKAGING_DIR}/examples/config.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES ${PROJECT_SOURCE_DIR}/docs/watch-policy.example.toml DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        RENAME watch-policy.toml)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples USE_SOURCE_PERMISSIONS)
install(FILES
  ${PROJECT_SOURCE_DIR}/docs/exit-codes.md
  ${PROJECT_SOURCE_DIR}/docs/ps-json.md
  ${PROJECT_SOURCE_DIR}/docs/kill-json.md
  ${PROJECT_SOURCE_DIR}/docs/doctor-json.md
  ${PROJECT_SOURCE_DIR}/docs/reap-json.md
  ${PROJECT_SOURCE_DIR}/docs/fleet-json.md
  ${PROJECT_SOURCE_DIR}/docs/fleet.md
  ${PROJECT_SOURCE_DIR}/docs/metrics.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# ---------------------------------------------------------------------------------------------
# Man pages: help2man runs the built binary's --help (one source of truth for the text).
set(GPUREAP_MAN_PAGES AUTO CACHE STRING
    "Generate the man pages with help2man: ON (required), OFF, or AUTO (when help2man is found)")
find_program(GPUREAP_HELP2MAN help2man)
if(GPUREAP_MAN_PAGES STREQUAL "ON" AND NOT GPUREAP_HELP2MAN)
  message(FATAL_ERROR "GPUREAP_MAN_PAGES=ON but help2man was not found: "
                      "install it (scripts/setup-deps.sh) or configure with -DGPUREAP_MAN_PAGES=OFF")
endif()
if(GPUREAP_HELP2MAN AND NOT GPUREAP_MAN_PAGES STREQUAL "OFF")
  set(GPUREAP_DOCDIR ${CMAKE_INSTALL_FULL_DOCDIR})  # named in the pages' FILES and SEE ALSO
  set(GPUREAP_HTTP_MODULE_DIR ${CMAKE_INSTALL_FULL_LIBDIR}/gpureap)
  set(man_out ${CMAKE_BINARY_DIR}/man)
  set(man_pages)
  set(man_includes)
  foreach(page gpureap gpureap-ps gpureap-kill gpureap-doctor gpureap-run gpureap-reap gpureap-watch gpureap-export
               gpureap-fleet gpureap-top)
    configure_file(${GPUREAP_PACKAGING_DIR}/man/${page}.h2m.in ${CMAKE_BINARY_DIR}/man-include/${page}.h2m @ONLY)
    list(APPEND man_includes ${CMAKE_BINARY_DIR}/man-include/${page}.h2m)
    list(APPEND man_pages ${man_out}/${page}.1.gz)
  endforeach()
  add_custom_command(OUTPUT ${man_pages}
    COMMAND ${GPUREAP_PACKAGING_DIR}/man/gen-man.sh $<TARGET_FILE:gpureap> ${man_out}
            ${CMAKE_BINARY_DIR}/man-include ${GPUREAP_HELP2MAN}
    DEPENDS gpureap ${GPUREAP_PACKAGING_DIR}/man/gen-man.sh ${man_includes}
    COMMENT "Generating the man pages from gpureap --help"
    VERBATIM)
  add_custom_target(gpureap_man ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "gpureap: help2man not found (or GPUREAP_MAN_PAGES=OFF): no man pages")
endif()

# ---------------------------------------------------------------------------------------------
# Tests that the shipped files match the binary.
if(GPUREAP_BUILD_TESTS)
  add_test(NAME packaging.completions_match_help
           COMMAND bash ${GPUREAP_PACKAGING_DIR}/tests/completions-match-help.sh $<TARGET_FILE:gpureap>
                   ${GPUREAP_PACKAGING_DIR}/completions/gpureap.bash ${GPUREAP_PACKAGING_DIR}/completions/_gpureap)
  set_tests_properties(packaging.completions_match_help PROPERTIES COST 40)  # see tests/CMakeLists.txt
  add_test(NAME packaging.completion_job_words
           COMMAND bash ${GPUREAP_PACKAGING_DIR}/tests/completion-job-words.sh ${GPUREAP_PACKAGING_DIR}/completions/gpureap.bash)
  add_test(NAME packaging.example_config_takes_effect
           COMMAND bash ${GPUREAP_PACKAGING_DIR}/tests/example-config-takes-effect.sh $<TARGET_FILE:gpureap>
                   ${GPUREAP_PACKAGING_DIR}/examples/config.toml)
  if(TARGET gpureap_man)
    add_test(NAME packaging.man_pages_match_help
             COMMAND bash ${GPUREAP_PACKAGING_DIR}/tests/man-pages-match-help.sh $<TARGET_FILE:gpureap> ${man_out})
    set_tests_properties(packaging.man_pages_match_help PROPERTIES SKIP_RETURN_CODE 77 COST 25)
  endif()
endif()

# ---------------------------------------------------------------------------------------------
# The packages: gpureap_<version>_<arch>.deb, gpureap-<version>-1.x86_64.rpm and
# gpureap-<version>-linux-x86_64.tar.gz (one generator per cpack run: scripts/package.sh).
set(GPUREAP_PACKAGE_MAINTAINER "gpureap maintainers <maintainers@users.noreply.a-seed-822c9f19.example>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_GENERATOR DEB RPM TGZ)
set(CPACK_PACKAGE_NAME gpureap)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${GPUREAP_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "find and safely end the processes holding NVIDIA GPU memory")
set(CPACK_PACKAGE_DESCRIPTION
    "gpureap answers who holds GPU memory and how to get it back. `gpureap ps` lists every GPU\n"
    "process and every holder of a GPU device file (forked workers, orphans, NVML clients),\n"
    "with how far each driver-reported PID can be trusted. `gpureap kill` ends them safely\n"
    "(pidfd-pinned, SIGTERM then SIGKILL, with their workers) and verifies with the driver\n"
    "that the memory came back. `gpureap doctor` explains memory no process accounts for and\n"
    "the safest remedy. It loads libnvidia-ml.so.1 at run time and works without it.")
string(JOIN "" CPACK_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # gpureap_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the binary's libraries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})  # the paths the man pages name
set(CPACK_STRIP_FILES ON)

# The RPM (rpmbuild from Debian's rpm package). Requires: rpm's own scan of the program (the C
# library's symbol versions); not of the HTTP module, whose libraries (Debian's libcpp-httplib
# and OpenSSL 3) no RHEL-family system packages under those names: gpureap says so when a
# command needs the module (README's Install section).
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)  # gpureap-<version>-1.<arch>.rpm
set(CPACK_RPM_PACKAGE_DESCRIPTION ${CPACK_PACKAGE_DESCRIPTION})
set(CPACK_RPM_PACKAGE_VENDOR "gpureap maintainers")
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_GROUP "Applications/System")
set(CPACK_RPM_PACKAGE_SUGGESTS "bash-completion")
# rpmbuild's own post-install steps (strip, .comment removal, recompression) left out: CPack
# has stripped the files and gzipped the pages, and the three packages carry one program.
set(CPACK_RPM_SPEC_MORE_DEFINE "%global __requires_exclude_from ^/usr/lib64/gpureap/.*$
%define _build_id_links none
%define debug_package %{nil}
%define __os_install_post %{nil}")
# Directories that other packages (filesystem, bash-completion, zsh) own.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /usr/share/bash-completion /usr/share/bash-completion/completions
    /usr/share/zsh /usr/share/zsh/site-functions /usr/share/man /usr/share/man/man1 /usr/lib64)

# The tarball: gpureap-<version>-linux-x86_64/{bin,lib,share}, runnable where it is unpacked.
set(CPACK_SYSTEM_PROCESSOR ${CMAKE_SYSTEM_PROCESSOR})
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/cpack_per_package.cmake)
include(CPack)
