"""Erpilot's command line and everything it runs beside the services (which live in services/ and libs/).

Each part has a package of its own (tests/unit/test_cli_packages.py keeps them free of cycles):

- ``cli``: the argparse commands of `erpilot`, thin; each parses, calls one of the packages below, prints;
- ``stack``: Erpilot on one machine (`erpilot up`, the e2e tests): embedded NATS and PostgreSQL, migrations,
  the service processes and their supervisor, the least-privilege NATS users and database roles, dev secrets;
- ``ops``: looking after a running deployment: dead letters (`erpilot dlq`) and the audit log (`erpilot audit`);
- ``torture``: the crash campaign at every failpoint (`erpilot torture`);
- ``bench``: the approval cycle's throughput and cost (`erpilot bench`);
- ``context_eval``: the context view on frozen long sessions (`erpilot context-eval`);
- ``asyncapi`` (`erpilot docs`) and ``mcp_stdio`` (`erpilot mcp --stdio`): one module each.
"""
