/* test_shquote.c — a command made of words nd_shquote_cat wrote is recognised as ours
 * (nd_shcmd_is_ours) for any bytes in the words (random words with quotes, $, spaces, control
 * bytes, backslashes); crafted commands a shell would run something from are not ours (the paste
 * of our own commands into sh is tested in tests/cli/output_inputs.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "util/shquote.h"

int main(void) {
    srand(12345);
    const char alphabet[] = "ab/._-=$'\"\\`;|&()<> \t\n\x1b\x7f%@,+:*?~#!{}[]";
    for (int trial = 0; trial < 2000; trial++) {
        char cmd[4096] = "nvfp4dbg trace";
        const int words = 1 + rand() % 4;
        for (int w = 0; w < words; w++) {
            char word[24];
            const int n = 1 + rand() % 20;
            for (int i = 0; i < n; i++) word[i] = alphabet[rand() % (int)(sizeof alphabet - 1)];
            word[n] = 0;
            strcat(cmd, " ");
            nd_shquote_cat(cmd, sizeof cmd, word);
        }
        CHECK(nd_shcmd_is_ours(cmd), "a command of quoted words is not recognised: %s", cmd);
    }
    const char *crafted[] = {
        "nvfp4dbg trace x; touch /tmp/pwned #",
        "nvfp4dbg trace $(touch /tmp/pwned)",
        "nvfp4dbg trace `id`",
        "nvfp4dbg trace a | sh",
        "nvfp4dbg trace 'unterminated",
        "nvfp4dbg trace $'\\e[31m'",
        "nvfp4dbg trace 'a\nb'",
        "nvfp4dbg trace a  b",
        "nvfp4dbg trace a && rm -rf ~",
        "rm -rf ~",
        "nvfp4dbg trace",
        "nvfp4dbg trace $HOME",
    };
    for (size_t i = 0; i < sizeof crafted / sizeof crafted[0]; i++)
        CHECK(!nd_shcmd_is_ours(crafted[i]), "crafted command taken as ours: %s", crafted[i]);
    CHECK(nd_shcmd_is_ours("nvfp4dbg trace golden/seed-bug-v4 --override model.layers.0.self_attn.q_a_proj.input_global_scale=0.5"),
          "a plain command is not recognised");
    return nd_test_report("test_shquote");
}
