// cpp-httplib exactly as Debian built libcpp-httplib.so: its pkg-config Cflags define these three
// macros, and they change the layout of httplib's classes, so every translation unit that includes
// httplib.h must see the same ones. Include this header from .cpp files only (never from a header):
// the flags then stay out of the shared precompiled header. cmake/XtrainWeb.cmake checks that
// pkg-config still agrees.
#pragma once
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
