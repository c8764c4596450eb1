/* daemon/main.c - hidetd's entry point; everything else is in daemon_lib (daemon/daemon.c). */
#include "daemon/daemon.h"

int main(int argc, char **argv)
{
    return hd_daemon_run(argc, argv);
}
