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
    /* the options next_command.c repeats, each with a random value (the checkpoint first) */
    const char *opts[] = {"--recipe", "--stack", "--reference-checkpoint", "--layers", "--mode", "--ref-numerics", "--ep",
                          "--tokens", "--tokens-file", "--prompt", "--prompt-file", "--override"};
    for (int trial = 0; trial < 2000; trial++) {
        char cmd[4096] = "nvfp4dbg trace";
        const int words = 1 + rand() % 4;
        for (int w = 0; w < words; w++) {
            char word[24];
            const int n = 1 + rand() % 20;
            for (int i = 0; i < n; i++) word[i] = alphabet[rand() % (int)(sizeof alphabet - 1)];
            word[n] = 0;
            if (w == 0 && word[0] == '-') word[0] = 'c'; /* the checkpoint: a plain '-' word would read as an option */
            if (w) {
                strcat(cmd, " ");
                strcat(cmd, opts[rand() % (int)(sizeof opts / sizeof opts[0])]);
            }
            strcat(cmd, " ");
            nd_shquote_cat(cmd, sizeof cmd, word);
        }
        if (rand() % 4 == 0) strcat(cmd, " --chat");
        CHECK(nd_shcmd_is_ours(cmd), "a command of quoted words is not recognised: %s", cmd);
    }
    CHECK(nd_shcmd_is_ours("nvfp4dbg trace ck --override a=1  # and this run's --prompt (too long to repeat here)"),
          "the too-long note is ours");
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
        "nvfp4dbg trace -o /tmp/x --force /tmp/y",
        "nvfp4dbg trace ck -o /etc/passwd --force",
        "nvfp4dbg trace ck --dump tensors --out /dev/sda --force",
        "nvfp4dbg trace ck --override",
        "nvfp4dbg trace ck --chat x",
        "nvfp4dbg trace ck  # and this run's --prompt; rm -rf ~ (too long to repeat here)",
        /* --out only last and only in the form next_command.c writes */
        "nvfp4dbg trace ck --out /etc/passwd",
        "nvfp4dbg trace ck --out x-repaired.h5 --force",
        "nvfp4dbg trace ck --out x-repaired.h5 --override a=1",
        "nvfp4dbg trace ck --out",
        "nvfp4dbg trace ck --out x.h5",
        "nvfp4dbg trace ck --out x-repaired-.h5",
        "nvfp4dbg trace ck --out x-repairedh5",
    };
    for (size_t i = 0; i < sizeof crafted / sizeof crafted[0]; i++)
        CHECK(!nd_shcmd_is_ours(crafted[i]), "crafted command taken as ours: %s", crafted[i]);
    CHECK(nd_shcmd_is_ours("nvfp4dbg trace golden/seed-bug-v4 --override model.layers.0.self_attn.q_a_proj.input_global_scale=0.5"),
          "a plain command is not recognised");
    CHECK(nd_shcmd_is_ours("nvfp4dbg trace ck --override a=1 --out run-repaired.h5"), "the next command's --out is not recognised");
    CHECK(nd_shcmd_is_ours("nvfp4dbg trace ck --out 'my runs/t-repaired-12.h5'"), "a quoted --out X-repaired-N.h5 is not recognised");
    return nd_test_report("test_shquote");
}
