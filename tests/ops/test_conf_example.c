/* tests/ops/test_conf_example.c - deploy/hidetd.conf against the daemon's own config parser.
 *
 *   test_conf_example PATH/TO/deploy/hidetd.conf
 *
 * 1. The shipped file, as installed (every key commented out), loads and changes nothing.
 * 2. With every "#key = value" line uncommented it still loads, and equals the built-in defaults:
 *    so each documented default is both valid and true. The environment is set so the
 *    path defaults are the system service's paths the file shows (XDG_RUNTIME_DIR=/run/hidetd,
 *    XDG_CACHE_HOME=/var/lib).
 * That every key is documented at all is checked by check_docs.py against config.h's table.
 */
#include "daemon/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "tests/slurp.h"

/* Removes the '#' of lines "#key = value" where value is not empty (keys without a default,
 * such as token, stay commented: an empty value is not valid for them). Counts them. */
static char *uncomment(const char *text, int *ret_n)
{
    char *out = strdup(text), *line = out;
    int n = 0;

    if (!out)
        return NULL;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > 1 && line[0] == '#' && line[1] >= 'a' && line[1] <= 'z') {
            char *eq = memchr(line, '=', len);
            const char *v = eq ? eq + 1 : NULL;
            while (v && v < line + len && *v == ' ')
                v++;
            if (eq && v < line + len) {
                line[0] = ' ';
                n++;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    *ret_n = n;
    return out;
}

int main(int argc, char **argv)
{
    hd_config defaults, shipped, all;
    char *text = NULL, *open_text = NULL, *err = NULL, live[2048], restart[2048];
    int n_set = 0, changed;

    if (argc != 2) {
        fprintf(stderr, "usage: %s deploy/hidetd.conf\n", argv[0]);
        return 2;
    }
    setenv("XDG_RUNTIME_DIR", "/run/hidetd", 1);
    setenv("XDG_CACHE_HOME", "/var/lib", 1);
    text = test_slurp(argv[1], NULL);
    if (!text) {
        perror(argv[1]);
        return 1;
    }
    CHECK(hd_config_init(&defaults) == 0);
    CHECK(hd_config_init(&shipped) == 0);
    CHECK(hd_config_init(&all) == 0);

    /* 1. As shipped. */
    if (hd_config_load_string(&shipped, text, "hidetd.conf", &err) < 0) {
        fprintf(stderr, "the shipped file is rejected: %s\n", err ? err : "?");
        failures++;
    }
    free(err);
    err = NULL;
    changed = hd_config_diff(&defaults, &shipped, live, sizeof(live), restart, sizeof(restart));
    if (changed) {
        fprintf(stderr, "the shipped file changes %d key(s): %s %s\n", changed, live, restart);
        failures++;
    }

    /* 2. Every documented default, uncommented. */
    open_text = uncomment(text, &n_set);
    CHECK(open_text != NULL);
    if (open_text && hd_config_load_string(&all, open_text, "hidetd.conf(uncommented)", &err) < 0) {
        fprintf(stderr, "the documented defaults are rejected: %s\n", err ? err : "?");
        failures++;
    }
    free(err);
    changed = hd_config_diff(&defaults, &all, live, sizeof(live), restart, sizeof(restart));
    if (changed) {
        fprintf(stderr, "documented defaults differ from the built-in ones for: %s %s\n", live,
                restart);
        failures++;
    }
    /* The file documents every key; those without a default (token, token_file, workers path)
     * stay commented, so at least 20 keys were really parsed here. */
    if (n_set < 20) {
        fprintf(stderr, "only %d keys uncommented\n", n_set);
        failures++;
    }

    hd_config_clear(&defaults);
    hd_config_clear(&shipped);
    hd_config_clear(&all);
    free(text);
    free(open_text);
    if (failures) {
        fprintf(stderr, "test_conf_example: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_conf_example: shipped file loads; %d documented defaults match\n", n_set);
    return 0;
}
