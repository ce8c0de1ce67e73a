# SPDX-License-Identifier: LGPL-2.1-or-later
# Hardened code generation and linking for everything built here (NB_HARDEN,
# on by default): netbrokerd is a privileged helper, libnetbroker runs inside
# privileged daemons. What Debian's hardening=+all gives a package, and what
# newer dpkg adds:
#   PIE executables, RELRO + BIND_NOW, -fstack-protector-strong,
#   -fstack-clash-protection, -fcf-protection (x86), -Werror=format-security,
#   _FORTIFY_SOURCE: 3 with gcc >= 12 (glibc >= 2.34), else 2, and only when
#   the build optimises, since glibc needs -O for it and warns otherwise (a
#   Debug build or one with no build type has none, and says so).
# A packager's flags win: each flag is added only when the packager's
# CFLAGS/LDFLAGS (CMAKE_C_FLAGS, CMAKE_C_FLAGS_<CONFIG>, the
# CMAKE_*_LINKER_FLAGS) say nothing about it, so dpkg-buildflags'
# -D_FORTIFY_SOURCE=2 is not redefined (a warning, an error with -Werror) and
# a -fno-stack-protector or -Wl,-z,lazy given on purpose stays in force.
# The sanitizer builds get no _FORTIFY_SOURCE: its checked copies hide
# accesses from ASan's interceptors.
set(NB_HARDEN_FORTIFY OFF) # whether the build has _FORTIFY_SOURCE (tests/CMakeLists.txt)
if(NOT NB_HARDEN)
  message(STATUS "hardening: off (NB_HARDEN=OFF)")
  return()
endif()

include(CheckCCompilerFlag)
include(CheckPIESupported)

string(TOUPPER "${CMAKE_BUILD_TYPE}" nb_bt)
set(nb_cflags " ${CMAKE_C_FLAGS} ${CMAKE_C_FLAGS_${nb_bt}} ")
set(nb_ldflags " ${CMAKE_EXE_LINKER_FLAGS} ${CMAKE_SHARED_LINKER_FLAGS} ")
set(nb_hardening)

# Position-independent executables (-fPIE and -pie), unless refused.
if(NOT nb_cflags MATCHES " -f(no-)?(pie|PIE) " AND NOT nb_ldflags MATCHES " -no-pie ")
  check_pie_supported(OUTPUT_VARIABLE nb_pie_msg LANGUAGES C)
  if(CMAKE_C_LINK_PIE_SUPPORTED)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    list(APPEND nb_hardening pie)
  endif()
endif()

# nb_harden_cflag(FLAG PATTERN): add FLAG when the compiler takes it and the
# packager's CFLAGS do not match PATTERN.
macro(nb_harden_cflag flag pattern)
  string(MAKE_C_IDENTIFIER "NB_HAVE${flag}" nb_var)
  if(NOT nb_cflags MATCHES "${pattern}")
    check_c_compiler_flag(${flag} ${nb_var})
    if(${nb_var})
      add_compile_options(${flag})
      list(APPEND nb_hardening ${flag})
    endif()
  endif()
endmacro()
nb_harden_cflag(-fstack-protector-strong " -f(no-)?stack-protector")
nb_harden_cflag(-fstack-clash-protection " -f(no-)?stack-clash-protection")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|i[3-6]86)$")
  nb_harden_cflag(-fcf-protection " -f(no-)?cf-protection")
endif()
# The project's -Wformat=2 is on already (a check of this flag alone fails).
if(NOT nb_cflags MATCHES " -W(no-)?(error=)?format-security")
  add_compile_options(-Werror=format-security)
  list(APPEND nb_hardening -Werror=format-security)
endif()

# _FORTIFY_SOURCE needs optimisation: the last -O of the flags decides.
string(REGEX MATCHALL " -O[^ ]*" nb_opts "${nb_cflags}")
list(POP_BACK nb_opts nb_opt)
if(nb_cflags MATCHES "[-/][DU] ?_FORTIFY_SOURCE")
  list(APPEND nb_hardening "_FORTIFY_SOURCE (the packager's)")
  if(nb_cflags MATCHES "-D ?_FORTIFY_SOURCE=?[1-9]" AND nb_opt AND NOT nb_opt STREQUAL " -O0")
    set(NB_HARDEN_FORTIFY ON)
  endif()
elseif(NB_SANITIZE OR NB_FUZZ)
  # nothing: see above
elseif(NOT nb_opt OR nb_opt STREQUAL " -O0")
  message(STATUS "hardening: no _FORTIFY_SOURCE, the build does not optimise "
    "(CMAKE_BUILD_TYPE '${CMAKE_BUILD_TYPE}')")
else()
  set(nb_fortify 2)
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU" AND CMAKE_C_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    set(nb_fortify 3)
  endif()
  # -U first: some compilers (Ubuntu's gcc) predefine it.
  add_compile_options(-U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=${nb_fortify})
  list(APPEND nb_hardening _FORTIFY_SOURCE=${nb_fortify})
  set(NB_HARDEN_FORTIFY ON)
endif()

# Full RELRO: the GOT read-only after start-up, every symbol bound at load.
if(NOT nb_ldflags MATCHES "-z,? ?(no)?relro")
  add_link_options(LINKER:-z,relro)
  list(APPEND nb_hardening relro)
endif()
if(NOT nb_ldflags MATCHES "-z,? ?(now|lazy)")
  add_link_options(LINKER:-z,now)
  list(APPEND nb_hardening now)
endif()
string(REPLACE ";" " " nb_hardening "${nb_hardening}")
message(STATUS "hardening: ${nb_hardening}")
