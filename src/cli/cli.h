/* cli: one function per subcommand, each in its own cmd_*.c file. They get
 * argv starting at the subcommand name and return the process exit code. */
#ifndef MX_CLI_H
#define MX_CLI_H
int cmd_arch(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_rerank(int argc, char **argv);
#endif
