"""``/redfish/v1/AccountService`` of the simulated BMC (hardware stand-in): read-only.

One account (the simulator's ``--username``, role ``Administrator``) and the three roles every
Redfish service predefines, with the privileges DSP0266 ("Roles": Administrator, Operator,
ReadOnly) assigns them. The stand-in creates, changes and deletes no account or role: those
requests are answered 405 with ``Allow`` (a BMC may refuse account management; the project's
client never manages accounts).
"""

from __future__ import annotations

from flask import Blueprint, Response, abort

from lab.redfish_sim.context import bmc, json_response
from lab.redfish_sim.state import etag_of

bp = Blueprint("accounts", __name__)
SERVICE = "/redfish/v1/AccountService"
ACCOUNTS = f"{SERVICE}/Accounts"
ROLES = f"{SERVICE}/Roles"
#: DSP0266 "Roles": the predefined roles and their AssignedPrivileges.
PREDEFINED_ROLES = {
    "Administrator": ["Login", "ConfigureManager", "ConfigureUsers", "ConfigureComponents", "ConfigureSelf"],
    "Operator": ["Login", "ConfigureComponents", "ConfigureSelf"],
    "ReadOnly": ["Login", "ConfigureSelf"],
}


@bp.get(SERVICE)
def account_service() -> Response:
    """The AccountService, linking accounts and roles."""
    return json_response({"@odata.id": SERVICE, "@odata.type": "#AccountService.v1_5_0.AccountService",
                          "Accounts": {"@odata.id": ACCOUNTS}, "Id": "AccountService",
                          "Name": "Account Service", "Roles": {"@odata.id": ROLES}, "ServiceEnabled": True})


@bp.get(ACCOUNTS)
def accounts() -> Response:
    """The account collection: the simulator's one account."""
    members = [{"@odata.id": f"{ACCOUNTS}/{bmc().username}"}]
    return json_response({"@odata.id": ACCOUNTS,
                          "@odata.type": "#ManagerAccountCollection.ManagerAccountCollection",
                          "Members": members, "Members@odata.count": 1, "Name": "Accounts Collection"})


@bp.get(f"{ACCOUNTS}/<account_id>")
def account(account_id: str) -> Response:
    """The account (never its password), with an ETag."""
    if account_id != bmc().username:
        abort(404)
    body = {"@odata.id": f"{ACCOUNTS}/{account_id}", "@odata.type": "#ManagerAccount.v1_3_0.ManagerAccount",
            "Enabled": True, "Id": account_id, "Links": {"Role": {"@odata.id": f"{ROLES}/Administrator"}},
            "Locked": False, "Name": "User Account", "RoleId": "Administrator", "UserName": account_id}
    etag = etag_of(body)
    return json_response({**body, "@odata.etag": etag}, etag=etag)


@bp.get(ROLES)
def roles() -> Response:
    """The role collection (the three predefined roles)."""
    members = [{"@odata.id": f"{ROLES}/{name}"} for name in PREDEFINED_ROLES]
    return json_response({"@odata.id": ROLES, "@odata.type": "#RoleCollection.RoleCollection",
                          "Members": members, "Members@odata.count": len(members),
                          "Name": "Roles Collection"})


@bp.get(f"{ROLES}/<role_id>")
def role(role_id: str) -> Response:
    """A predefined role."""
    if role_id not in PREDEFINED_ROLES:
        abort(404)
    return json_response({"@odata.id": f"{ROLES}/{role_id}", "@odata.type": "#Role.v1_2_1.Role",
                          "AssignedPrivileges": PREDEFINED_ROLES[role_id], "Id": role_id,
                          "IsPredefined": True, "Name": f"{role_id} Role", "OemPrivileges": [],
                          "RoleId": role_id})
