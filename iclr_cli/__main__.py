from iclr_cli.cli.app import main

main()
