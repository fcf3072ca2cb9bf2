"""The referee: jobmatch's Grid Engine scenarios run on a real Son of Grid Engine 8.1.9
(conformance/gridengine/install.sh sets it up) and compared per job; see docs/conformance.md."""
