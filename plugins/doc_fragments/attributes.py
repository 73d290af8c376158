# -*- coding: utf-8 -*-
# Copyright: gb10.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The blocks every module of the collection repeated: its authors, and the
    attributes of a module that only reads or computes (most of them: the roles change things
    with the well-kept modules, these modules tell them what to change)."""

    # Every module.
    DOCUMENTATION = r'''
options: {}
author:
  - gb10.serving developers (@gb10-serving)
'''

    # A module that changes nothing: check mode does the same reads and computation.
    READ_ONLY = r'''
options: {}
attributes:
  check_mode:
    support: full
    description: The module only reads or computes; check mode does the same.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to show.
'''
