"""Roles map to permissions in this one table; code checks permissions, never role names."""

from __future__ import annotations

from enum import IntEnum


class Role(IntEnum):
    VIEWER = 10
    EDITOR = 20
    ADMIN = 30
    OWNER = 40

    @classmethod
    def parse(cls, name: str) -> Role:
        return cls[name.upper()]

    @property
    def label(self) -> str:
        return self.name.lower()


ROLE_CHOICES = [(role.label, role.label.capitalize()) for role in Role]

# permission -> the lowest role that holds it
PERMISSIONS: dict[str, Role] = {
    "workspace:read": Role.VIEWER,
    "memory:read": Role.VIEWER,
    "memory:write": Role.EDITOR,
    "knowledge:read": Role.VIEWER,
    "knowledge:write": Role.EDITOR,
    "context_sets:manage": Role.EDITOR,
    "ask_history:manage": Role.OWNER,
    "members:manage": Role.OWNER,
    "usage:read_all": Role.OWNER,
    "credits:manage": Role.OWNER,
    "agents:manage": Role.ADMIN,
}

# credential scopes and the permission each needs from its member's *current* role
MEMORY_SCOPES: dict[str, str] = {"memory:read": "memory:read", "memory:write": "memory:write"}


def role_has(role_name: str, permission: str) -> bool:
    return Role.parse(role_name) >= PERMISSIONS[permission]


def scope_minimum_role(scope: str) -> Role:
    """The lowest role whose credentials may hold `scope`."""
    return PERMISSIONS[MEMORY_SCOPES[scope]]


def scope_allowed_for_role(scope: str, role_name: str) -> bool:
    return role_has(role_name, MEMORY_SCOPES[scope])
