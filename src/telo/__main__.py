from telo.cli import main

main()
