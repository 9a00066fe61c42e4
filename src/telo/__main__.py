from telo.cli.main import main

main()
