from erpilot.cli import main

main()
