# Install rules and the Debian package (cpack -G DEB).
#
#   cmake --install build [--prefix /usr]   ds-server, ds-cli, the systemd units, the example
#                                           config and the docs, in the standard places
#   cmake --install build --component dev   libds: the static libraries (libds.a and the
#                                           kernels' libds_kernels.a) and the public headers
#                                           include/ds/*.h (not part of the package)
#   scripts/package.sh                      the .deb (prefix /usr, config in /etc)
#
# The units name the installed paths, so they are written at install time for the prefix
# in force then (`--prefix` or the package's /usr), not for the one configured.
set(CMAKE_INSTALL_DOCDIR share/doc/ds-server)
include(GNUInstallDirs)

install(TARGETS ds-server ds-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ds ds_kernels ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev EXCLUDE_FROM_ALL)
install(DIRECTORY include/ds DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev EXCLUDE_FROM_ALL
        FILES_MATCHING PATTERN "*.h")
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")
install(FILES configs/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/configs)
install(FILES configs/nginx/ds-server.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/nginx)

# System configuration follows the GNU rule: /etc for the /usr prefix, PREFIX/etc otherwise.
install(CODE "set(ds_source_dir \"${CMAKE_SOURCE_DIR}\")")
install(CODE [[
  set(ds_prefix "${CMAKE_INSTALL_PREFIX}")
  if(ds_prefix STREQUAL "/usr")
    set(DS_SYSCONFDIR "/etc")
  else()
    set(DS_SYSCONFDIR "${ds_prefix}/etc")
  endif()
  set(DS_BINDIR "${ds_prefix}/bin")
  set(DS_DOCDIR "${ds_prefix}/share/doc/ds-server")
  set(ds_units "$ENV{DESTDIR}${ds_prefix}/lib/systemd/system")
  foreach(unit ds-server.service ds-server@.service)
    message(STATUS "Installing: ${ds_units}/${unit}")
    configure_file("${ds_source_dir}/configs/${unit}.in" "${ds_units}/${unit}" @ONLY)
  endforeach()
  set(ds_conf "${DS_SYSCONFDIR}/ds-server")  # file(INSTALL) adds DESTDIR itself
  file(INSTALL "${ds_source_dir}/configs/ds-server.json" DESTINATION "${ds_conf}"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
]])

set(CPACK_PACKAGE_NAME ds-server)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The ds-server authors")
set(CPACK_PACKAGE_CONTACT "The ds-server authors <ds-server@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CPU inference server for GGUF DeepSeek models")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
# DESTDIR staging keeps CMAKE_INSTALL_PREFIX at /usr during packaging, so the units and
# /etc paths written above are the installed ones.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, init-system-helpers, numactl")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/configs/debian/conffiles ${CMAKE_SOURCE_DIR}/configs/debian/postinst
    ${CMAKE_SOURCE_DIR}/configs/debian/prerm ${CMAKE_SOURCE_DIR}/configs/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
