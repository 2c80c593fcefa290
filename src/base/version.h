/* The release version (the git commit and build flags are given to the
 * CLI's main.c by the Makefile). */
#ifndef MX_VERSION_H
#define MX_VERSION_H
#define MX_VERSION "0.1.0"
#endif
