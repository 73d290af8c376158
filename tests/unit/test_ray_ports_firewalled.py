"""Every port Ray listens on by ray_cluster's settings is one the firewall closes to all but the
cluster (issue 6, issue 26 section 5): ray_cluster fixes the object and node manager ports, so
that roles/firewall can list exactly them. The two roles' defaults are read as the collection
ships them; a port changed in one and not the other turns this red.
"""
import os

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Ray's own fixed ports that ray_cluster does not set: dashboard, client server, dashboard agent.
RAY_DEFAULT_PORTS = (8265, 10001, 52365)


def defaults(role):
    with open(os.path.join(TOP, 'roles', role, 'defaults', 'main.yml')) as f:
        return yaml.safe_load(f)


def closed(port, protected):
    for entry in protected:
        low, unused_sep, high = str(entry).partition(":")
        if int(low) <= port <= int(high or low):
            return True
    return False


def ray_ports():
    ray = defaults('ray_cluster')
    return {name: ray[name] for name in ('ray_cluster_port', 'ray_cluster_object_manager_port',
                                         'ray_cluster_node_manager_port')}


def test_the_firewall_closes_every_port_ray_cluster_fixes():
    protected = defaults('firewall')['firewall_protected_ports']
    ports = dict(ray_ports(), **{'ray default %d' % p: p for p in RAY_DEFAULT_PORTS})
    assert {name: port for name, port in ports.items() if not closed(int(port), protected)} == {}


def test_a_port_moved_in_ray_cluster_alone_would_be_found():
    # The check above, against a firewall list without the object manager's port.
    protected = [p for p in defaults('firewall')['firewall_protected_ports']
                 if str(p) != str(ray_ports()['ray_cluster_object_manager_port'])]
    assert not closed(int(ray_ports()['ray_cluster_object_manager_port']), protected)


def test_the_api_port_stays_open_to_clients():
    firewall = defaults('firewall')
    assert not closed(int(firewall['firewall_api_port']), firewall['firewall_protected_ports'])
