# Read by cpack once per package (CPACK_PROJECT_CONFIG_FILE, cmake/packaging.cmake): the tarball's
# name, gpureap-<version>-linux-<arch>.tar.gz, which is also its top directory, and no /usr
# inside it: bin/, lib/, share/ directly under that directory.
if(CPACK_GENERATOR STREQUAL "TGZ")
  set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}-${CPACK_PACKAGE_VERSION}-linux-${CPACK_SYSTEM_PROCESSOR}")
  set(CPACK_PACKAGING_INSTALL_PREFIX /)
endif()
