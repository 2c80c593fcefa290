#include "cli.h"
#include <stdio.h>
int cmd_arch(int argc, char **argv) { (void)argc; (void)argv; printf("(none yet)\n"); return 0; }
