from mqtool.cli.app import main

main()
