/* Chat templates by name, for models whose folder has none (base models,
 * tokenizer.model-only folders) or whose user wants another one:
 * `--chat-template NAME`. Each is the canonical Jinja of the format as the
 * model families publish it, reduced to text messages. "plain" is the
 * fallback a folder without a template gets: "Role: content" lines ending in
 * "Assistant:", which a base model continues as text. */
#include "template.h"
#include <string.h>

static const struct { const char *name, *about, *src; } g_named[] = {
    {"plain", "Role: content lines, then \"Assistant:\" (the fallback for models without a template)",
     "{%- for m in messages -%}"
     "{{ m['role'] | capitalize }}: {{ m['content'] if m['content'] is string else '' }}\n"
     "{% endfor -%}"
     "{%- if add_generation_prompt %}Assistant:{% endif -%}"},
    {"chatml", "<|im_start|>role ... <|im_end|> (Qwen, Hermes, SmolLM, ...)",
     "{%- for m in messages -%}"
     "{{ '<|im_start|>' + m['role'] + '\n' + (m['content'] if m['content'] is string else '') + '<|im_end|>\n' }}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif -%}"},
    {"llama3", "<|start_header_id|>role<|end_header_id|> ... <|eot_id|> (Llama 3.x)",
     "{{- bos_token -}}"
     "{%- for m in messages -%}"
     "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + (m['content'] if m['content'] is string else '') | trim + '<|eot_id|>' }}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif -%}"},
    {"llama2", "<s>[INST] <<SYS>> ... <</SYS>> ... [/INST] (Llama 2 chat)",
     "{%- set ns = namespace(sys='') -%}"
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{%- set ns.sys = '<<SYS>>\n' + m['content'] + '\n<</SYS>>\n\n' -%}"
     "{%- elif m['role'] == 'user' -%}{{ bos_token + '[INST] ' + (ns.sys + m['content']) | trim + ' [/INST]' }}{%- set ns.sys = '' -%}"
     "{%- elif m['role'] == 'assistant' -%}{{ ' ' + m['content'] | trim + ' ' + eos_token }}"
     "{%- endif -%}"
     "{%- endfor -%}"},
    {"mistral", "<s>[INST] ... [/INST] (Mistral instruct; a system message is put before the first user turn)",
     "{%- set ns = namespace(sys='') -%}"
     "{{- bos_token -}}"
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{%- set ns.sys = m['content'] + '\n\n' -%}"
     "{%- elif m['role'] == 'user' -%}{{ '[INST] ' + ns.sys + m['content'] + '[/INST]' }}{%- set ns.sys = '' -%}"
     "{%- elif m['role'] == 'assistant' -%}{{ m['content'] + eos_token }}"
     "{%- endif -%}"
     "{%- endfor -%}"},
    {"gemma", "<start_of_turn>user ... <end_of_turn> (Gemma; a system message is put before the first user turn)",
     "{%- set ns = namespace(sys='') -%}"
     "{{- bos_token -}}"
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{%- set ns.sys = m['content'] + '\n\n' -%}"
     "{%- else -%}"
     "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\n' + (ns.sys + m['content']) | trim + '<end_of_turn>\n' }}"
     "{%- set ns.sys = '' -%}"
     "{%- endif -%}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif -%}"},
    {"phi3", "<|user|> ... <|end|> (Phi-3, Phi-3.5)",
     "{%- for m in messages -%}"
     "{{ '<|' + m['role'] + '|>\n' + (m['content'] if m['content'] is string else '') + '<|end|>\n' }}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif -%}"},
    {"zephyr", "<|user|> ... </s> (Zephyr, TinyLlama chat)",
     "{%- for m in messages -%}"
     "{{ '<|' + m['role'] + '|>\n' + (m['content'] if m['content'] is string else '') + eos_token + '\n' }}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif -%}"},
};
#define N_NAMED (sizeof g_named / sizeof g_named[0])

const char *mx_chat_template_named(const char *name) {
    for (size_t i = 0; i < N_NAMED; i++)
        if (!strcmp(g_named[i].name, name)) return g_named[i].src;
    return NULL;
}

const char *mx_chat_template_name_at(size_t i, const char **about) {
    if (i >= N_NAMED) return NULL;
    if (about) *about = g_named[i].about;
    return g_named[i].name;
}
