import sys

try:  # a Ctrl-C while the imports load (a second or two on a busy machine): one line, not their traceback
    from evalkit.cli import main
except KeyboardInterrupt:
    sys.stderr.write("evalkit: interrupted\n")
    sys.exit(130)

sys.exit(main())
