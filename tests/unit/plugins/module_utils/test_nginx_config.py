# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which servers of nginx's whole configuration listen on the gateway's port
(plugins/module_utils/nginx_config.py), read from a real `nginx -T`: tests/fixtures/nginx/gateway-T.txt
is nginx 1.22.1's dump on a simulated head with the gateway deployed (Debian 12's nginx.conf with
its commented-out mail servers, mime.types, the gateway's site whose JSON answers hold braces and
semicolons in quotes, and the clients map, keys replaced by placeholders)."""

import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import nginx_config

pytestmark = pytest.mark.rule("A1")

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
with open(os.path.join(TOP, "tests", "fixtures", "nginx", "gateway-T.txt")) as handle:
    DUMP = handle.read()
SITE = "/etc/nginx/conf.d/gb10-gateway.conf"


def gateway_line():
    # The line of the gateway's server block within its own file, as nginx -T printed it.
    section = DUMP.split("# configuration file %s:\n" % SITE, 1)[1]
    return section.splitlines().index("server {") + 1


def test_the_deployed_gateway_is_the_one_server_on_its_port():
    assert nginx_config.servers_on(DUMP, 8443) == ["%s:%d" % (SITE, gateway_line())]
    # Debian's mail servers are comments, the clients map holds no server: nothing on 80 or 110.
    assert nginx_config.servers_on(DUMP, 80) == [] and nginx_config.servers_on(DUMP, 110) == []


def test_a_second_server_on_the_port_is_found_wherever_it_comes_from():
    # What a raw recipe field once added to the site (a server that proxies without the key), and
    # an operator's own site that takes the port.
    injected = DUMP.replace("\nserver {\n", "\nserver { listen 8443; location / { proxy_pass http://127.0.0.1:8000; } }\nserver {\n", 1)
    other = DUMP + ("# configuration file /etc/nginx/sites-enabled/mine:\n"
                    "server {\n    listen [::]:8443 ssl; # mine\n    server_name _;\n}\n")
    assert len(nginx_config.servers_on(injected, 8443)) == 2
    assert nginx_config.servers_on(other, 8443)[-1] == "/etc/nginx/sites-enabled/mine:1"


def test_listen_forms_stream_servers_defaults_and_upstreams():
    dump = ("# configuration file /etc/nginx/nginx.conf:\n"
            "http {\n upstream engine { server 127.0.0.1:8443; }\n"
            " server { server_name plain; }\n"
            " server { listen unix:/run/x.sock; listen localhost; }\n"
            " server { listen 127.0.0.1:8443 default_server; }\n}\n"
            "stream {\n server { listen *:8443; proxy_pass 10.0.0.2:9; }\n}\n")
    assert nginx_config.servers_on(dump, 80) == ["/etc/nginx/nginx.conf:3", "/etc/nginx/nginx.conf:4"]
    # An upstream's `server` is a directive, not a server block.
    assert nginx_config.servers_on(dump, 8443) == ["/etc/nginx/nginx.conf:5", "/etc/nginx/nginx.conf:8"]
    assert [nginx_config.listen_port(a.split()) for a in ("8443", "[::]:8443 ssl", "[::]", "unix:/x", "h:1")] == [8443, 8443, 80, None, 1]
