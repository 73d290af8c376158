# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter gb10.serving.nginx_servers_on as role api_gateway calls it (rule A1)."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.filter.nginx_servers_on import FilterModule

pytestmark = pytest.mark.rule("A1")
servers_on = FilterModule().filters()['nginx_servers_on']

DUMP = ("# configuration file /etc/nginx/conf.d/gb10-gateway.conf:\nserver {\n    listen 8443 ssl;\n}\n"
        "# configuration file /etc/nginx/sites-enabled/mine:\nserver { listen 8443; }\n")


def test_the_port_as_the_role_passes_it_a_string_from_a_template():
    assert servers_on(DUMP, port='8443') == ['/etc/nginx/conf.d/gb10-gateway.conf:1', '/etc/nginx/sites-enabled/mine:1']
    assert servers_on('', port=8443) == []


def test_a_missing_or_malformed_port_is_an_error_naming_the_filter():
    with pytest.raises(AnsibleFilterError, match='nginx_servers_on: port is required'):
        servers_on(DUMP)
    with pytest.raises(AnsibleFilterError, match='nginx_servers_on'):
        servers_on(DUMP, port='https')
