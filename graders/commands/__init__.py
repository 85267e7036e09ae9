"""The `grade` command's subcommands, one module each: its options, checked, then a call into the
stage that does the work. graders/cli.py picks the subcommand."""
