"""Redfish protocol rules of the simulated BMC (hardware stand-in): OData documents, headers,
query parameters (DMTF DSP0266, "Protocol details" and "Service responses").

- ``GET /redfish/v1/odata``: the OData service document (``@odata.context`` ``/redfish/v1/$metadata``,
  ``value``: one ``Singleton`` per resource the service root links); open, like the service root.
- ``GET /redfish/v1/$metadata``: the CSDL metadata document (``application/xml``) referencing the
  DMTF schemas the simulator's payloads use, with the ``Service`` entity container; open.
- Requests: an ``OData-Version`` other than ``4.0`` is answered 412 (DSP0266 "OData-Version":
  a service shall reject a version it does not support); a ``$``-query parameter is answered
  501 (the simulator implements none of ``$expand``/``$select``/``$filter``/``$top``/``$skip``,
  and its ``ProtocolFeaturesSupported`` says so); other query parameters are ignored.
- Responses: ``OData-Version: 4.0``, ``Cache-Control: no-cache`` (``no-store`` on session
  resources, which carry who is logged in), ``Allow`` on every GET/HEAD and 405 answer (the
  methods the route serves), ``Link: <schema>; rel=describedby`` on GET/HEAD of a resource
  whose ``@odata.type`` is a DMTF schema (OEM ``Nvidia*`` types have no public schema URL).
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from flask import Blueprint, Response, current_app, request

from lab.redfish_sim import fixtures
from lab.redfish_sim.context import error_response, json_response

bp = Blueprint("protocol", __name__)
SCHEMA_BASE = "https://redfish.dmtf.org/schemas/v1"
ODATA_VERSION = "4.0"
#: Methods this simulator never serves, so never listed in ``Allow``.
_HIDDEN_METHODS = frozenset({"OPTIONS"})
#: DMTF schemas the simulator's payloads use: namespace -> versioned namespace.
SCHEMAS = {
    "ServiceRoot": "ServiceRoot.v1_15_0", "ComputerSystemCollection": None,
    "ComputerSystem": "ComputerSystem.v1_17_0", "Bios": "Bios.v1_2_0", "Settings": "Settings.v1_3_5",
    "ActionInfo": "ActionInfo.v1_1_2", "ManagerCollection": None, "Manager": "Manager.v1_14_0",
    "SessionService": "SessionService.v1_0_2", "SessionCollection": None, "Session": "Session.v1_5_0",
    "ChassisCollection": None, "Chassis": "Chassis.v1_23_0", "NetworkAdapterCollection": None,
    "NetworkAdapter": "NetworkAdapter.v1_11_0", "AccountService": "AccountService.v1_5_0",
    "ManagerAccountCollection": None, "ManagerAccount": "ManagerAccount.v1_3_0", "RoleCollection": None,
    "Role": "Role.v1_2_1", "Message": "Message.v1_1_1", "Resource": "Resource.v1_0_0",
}
#: Service-root links listed in the OData service document.
SINGLETONS = ("Systems", "Chassis", "Managers", "SessionService", "AccountService")


@bp.get("/redfish/v1/odata")
def service_document() -> Response:
    """The OData service document."""
    value = [{"kind": "Singleton", "name": "Service", "url": "/redfish/v1/"}]
    value += [{"kind": "Singleton", "name": name, "url": f"/redfish/v1/{name}"} for name in SINGLETONS]
    value.append({"kind": "Singleton", "name": "Sessions", "url": "/redfish/v1/SessionService/Sessions"})
    return json_response({"@odata.context": "/redfish/v1/$metadata", "value": value})


def metadata_xml() -> str:
    """The ``$metadata`` CSDL document (OData CSDL XML 4.0, as DSP0266 "$metadata" asks)."""
    refs = []
    for namespace, versioned in SCHEMAS.items():
        includes = [f'    <edmx:Include Namespace="{namespace}"/>']
        if versioned:
            includes.append(f'    <edmx:Include Namespace="{versioned}"/>')
        refs.append(f'  <edmx:Reference Uri={quoteattr(f"{SCHEMA_BASE}/{namespace}_v1.xml")}>\n'
                    + "\n".join(includes) + "\n  </edmx:Reference>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">\n'
            + "\n".join(refs) + "\n"
            '  <edmx:DataServices>\n'
            '    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">\n'
            '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_15_0.ServiceContainer"/>\n'
            '    </Schema>\n'
            '  </edmx:DataServices>\n'
            '</edmx:Edmx>\n')


@bp.get("/redfish/v1/$metadata")
def metadata() -> Response:
    """The CSDL metadata document."""
    resp = Response(metadata_xml(), status=200, mimetype="application/xml")
    resp.headers["OData-Version"] = ODATA_VERSION
    return resp


def check_request() -> Response | None:
    """412 for an unsupported ``OData-Version``, 501 for a ``$`` query parameter; else None."""
    version = request.headers.get("OData-Version")
    if version is not None and version.strip() != ODATA_VERSION:
        return error_response(412, [fixtures.message("HeaderInvalid", f"OData-Version: {version}")])
    unsupported = [k for k in request.args if k.startswith("$")]
    if unsupported:
        return error_response(501, [fixtures.message("QueryParameterUnsupported", k) for k in unsupported])
    return None


def allowed_methods(valid: frozenset[str] | set[str] | list[str] | None = None) -> str | None:
    """The ``Allow`` value for the current request's path: the methods of every route serving
    it (or ``valid``, from a 405)."""
    methods = valid
    if methods is None:
        methods = current_app.url_map.bind_to_environ(request.environ).allowed_methods()
    if not methods:
        return None
    return ", ".join(sorted(set(methods) - _HIDDEN_METHODS))


def add_headers(resp: Response) -> Response:
    """Cache-Control, Allow and Link on a Redfish response (see the module docstring)."""
    sensitive = "/SessionService/Sessions" in request.path or "/Accounts" in request.path
    resp.headers.setdefault("Cache-Control", "no-store" if sensitive else "no-cache")
    resp.headers.setdefault("OData-Version", ODATA_VERSION)
    if request.method in ("GET", "HEAD") and resp.status_code == 200:
        allow = allowed_methods()
        if allow:
            resp.headers.setdefault("Allow", allow)
        if resp.is_json:
            body = resp.get_json(silent=True)
            odata_type = body.get("@odata.type") if isinstance(body, dict) else None
            if isinstance(odata_type, str) and not odata_type.lstrip("#").startswith("Nvidia"):
                parts = odata_type.lstrip("#").split(".")
                name = ".".join(parts[:2]) if len(parts) == 3 else parts[0]
                resp.headers.setdefault("Link", f"<{SCHEMA_BASE}/{name}.json>; rel=describedby")
    return resp

