"""Typed views of the Redfish payloads the client reads (pydantic, parsed at the boundary).

Each model names the schema it follows. Only the fields the project uses are declared;
everything else in a payload is ignored. Field aliases are the Redfish property names.

Schemas: DMTF Redfish (https://redfish.dmtf.org/schemas/v1/): ServiceRoot, Session,
ComputerSystem, Bios, Settings, ActionInfo, Manager, Message; NVIDIA OEM
``NvidiaComputerSystem`` (BlueField BMC docs, "BlueField Modes of Operation Configuration",
"NIC Subsystem Management"), ``ExternalHostPrivileges`` and ``HostPrivilegeConfig`` (same page,
releases 24.10-LTS ... 25.07 and 25.10-LTS / 26.01).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: A BIOS attribute value: Redfish attributes are strings, numbers, booleans or null.
AttrValue = bool | int | float | str | None
DpuMode = Literal["DpuMode", "NicMode"]
EnabledDisabled = Literal["Enabled", "Disabled"]
PrivilegeLevel = Literal["Privileged", "Restricted"]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class Link(_Model):
    """``{"@odata.id": "/redfish/v1/..."}``."""

    odata_id: str = Field(alias="@odata.id")


class RedfishMessage(_Model):
    """One entry of ``@Message.ExtendedInfo`` (Message schema, Base registry ids).

    ``severity`` takes ``MessageSeverity`` (Message v1_1+) or the older ``Severity``.
    """

    message_id: str = Field("", alias="MessageId")
    message: str = Field("", alias="Message")
    message_args: list[str] = Field(default_factory=list, alias="MessageArgs")
    severity: str | None = Field(None, alias="MessageSeverity")
    resolution: str | None = Field(None, alias="Resolution")
    related_properties: list[str] = Field(default_factory=list, alias="RelatedProperties")

    @model_validator(mode="before")
    @classmethod
    def _legacy_severity(cls, data: Any) -> Any:
        if isinstance(data, dict) and "MessageSeverity" not in data and "Severity" in data:
            return {**data, "MessageSeverity": data["Severity"]}
        return data

    @field_validator("message_args", mode="before")
    @classmethod
    def _args_as_strings(cls, value: Any) -> Any:
        return [str(v) for v in value] if isinstance(value, list) else value

    @property
    def short_id(self) -> str:
        """The id without registry prefix and version: ``PropertyUnknown``."""
        return self.message_id.rsplit(".", 1)[-1]


class ErrorInfo(_Model):
    """The ``error`` object of an error response (DSP0266 "Error responses")."""

    code: str = ""
    message: str = ""
    extended_info: list[RedfishMessage] = Field(default_factory=list, alias="@Message.ExtendedInfo")


class ErrorResponse(_Model):
    """``{"error": {...}}``."""

    error: ErrorInfo


class ServiceRootLinks(_Model):
    """``Links`` of the service root."""

    sessions: Link | None = Field(None, alias="Sessions")


class ServiceRoot(_Model):
    """``GET /redfish/v1`` (ServiceRoot schema). Readable without authentication."""

    redfish_version: str | None = Field(None, alias="RedfishVersion")
    vendor: str | None = Field(None, alias="Vendor")
    product: str | None = Field(None, alias="Product")
    uuid: str | None = Field(None, alias="UUID")
    systems: Link | None = Field(None, alias="Systems")
    managers: Link | None = Field(None, alias="Managers")
    session_service: Link | None = Field(None, alias="SessionService")
    links: ServiceRootLinks = Field(default_factory=ServiceRootLinks, alias="Links")

    @property
    def sessions_path(self) -> str | None:
        """Where to POST a login, or None when the service has no SessionService."""
        if self.links.sessions is not None:
            return self.links.sessions.odata_id
        if self.session_service is not None:
            return self.session_service.odata_id.rstrip("/") + "/Sessions"
        return None


class Collection(_Model):
    """A resource collection: only the member links."""

    members: list[Link] = Field(default_factory=list, alias="Members")

    @property
    def ids(self) -> list[str]:
        """Member ids (last path segment)."""
        return [m.odata_id.rstrip("/").rsplit("/", 1)[-1] for m in self.members]


class Session(_Model):
    """A Session resource (the token travels in the ``X-Auth-Token`` header, not here)."""

    odata_id: str = Field(alias="@odata.id")
    id: str = Field(alias="Id")
    user_name: str | None = Field(None, alias="UserName")


class ResetAction(_Model):
    """``Actions["#ComputerSystem.Reset"]``; allowable values inline or via ActionInfo."""

    target: str
    allowable_values: list[str] | None = Field(None, alias="ResetType@Redfish.AllowableValues")
    action_info: str | None = Field(None, alias="@Redfish.ActionInfo")


class SystemActions(_Model):
    """``Actions`` of a ComputerSystem."""

    reset: ResetAction | None = Field(None, alias="#ComputerSystem.Reset")


class Boot(_Model):
    """``Boot`` of a ComputerSystem: the one-time/continuous boot override."""

    override_enabled: str | None = Field(None, alias="BootSourceOverrideEnabled")
    override_target: str | None = Field(None, alias="BootSourceOverrideTarget")
    override_mode: str | None = Field(None, alias="BootSourceOverrideMode")
    allowed_targets: list[str] | None = Field(None, alias="BootSourceOverrideTarget@Redfish.AllowableValues")


class OemLinks(_Model):
    """``Oem`` of a BlueField ComputerSystem: ``{"Nvidia": {"@odata.id": ...}}``."""

    nvidia: Link | None = Field(None, alias="Nvidia")


class ComputerSystem(_Model):
    """``GET /redfish/v1/Systems/{id}`` (ComputerSystem schema)."""

    odata_id: str = Field(alias="@odata.id")
    id: str = Field(alias="Id")
    name: str | None = Field(None, alias="Name")
    power_state: str | None = Field(None, alias="PowerState")
    bios_version: str | None = Field(None, alias="BiosVersion")
    boot: Boot = Field(default_factory=Boot, alias="Boot")
    bios: Link | None = Field(None, alias="Bios")
    actions: SystemActions = Field(default_factory=SystemActions, alias="Actions")
    oem: OemLinks = Field(default_factory=OemLinks, alias="Oem")
    etag: str | None = None


class SettingsObject(_Model):
    """``@Redfish.Settings`` (Settings schema): where pending values are written."""

    settings_object: Link | None = Field(None, alias="SettingsObject")
    supported_apply_times: list[str] = Field(default_factory=list, alias="SupportedApplyTimes")


class Bios(_Model):
    """``GET .../Bios`` (Bios schema): the *effective* attributes."""

    odata_id: str = Field(alias="@odata.id")
    id: str | None = Field(None, alias="Id")
    attributes: dict[str, AttrValue] = Field(default_factory=dict, alias="Attributes")
    settings: SettingsObject | None = Field(None, alias="@Redfish.Settings")
    etag: str | None = None

    @property
    def settings_path(self) -> str | None:
        """URI of the pending-settings resource, or None when the BIOS takes no settings."""
        if self.settings is None or self.settings.settings_object is None:
            return None
        return self.settings.settings_object.odata_id


class BiosSettings(_Model):
    """``GET .../Bios/Settings``: attributes that apply at the next reset, and the ETag
    to send as ``If-Match`` when changing them."""

    odata_id: str = Field(alias="@odata.id")
    attributes: dict[str, AttrValue] = Field(default_factory=dict, alias="Attributes")
    etag: str | None = None


class Manager(_Model):
    """``GET /redfish/v1/Managers/{id}`` (Manager schema): the BMC itself."""

    odata_id: str = Field(alias="@odata.id")
    id: str = Field(alias="Id")
    name: str | None = Field(None, alias="Name")
    manager_type: str | None = Field(None, alias="ManagerType")
    firmware_version: str | None = Field(None, alias="FirmwareVersion")


class OemAction(_Model):
    """An OEM action: its ``target`` URI."""

    target: str


class NvidiaSystemActions(_Model):
    """Actions of ``Systems/Bluefield/Oem/Nvidia``."""

    mode_set: OemAction | None = Field(None, alias="#Mode.Set")
    host_rshim_set: OemAction | None = Field(None, alias="#HostRshim.Set")


class NvidiaSystem(_Model):
    """``GET /redfish/v1/Systems/Bluefield/Oem/Nvidia`` (BlueField-3 only).

    ``mode``: the DPU's operation mode (``DpuMode`` | ``NicMode``); ``host_rshim``
    (``Enabled`` | ``Disabled``): whether the host may own the DPU's rshim.
    """

    odata_id: str = Field(alias="@odata.id")
    mode: str | None = Field(None, alias="Mode")
    host_rshim: str | None = Field(None, alias="HostRshim")
    actions: NvidiaSystemActions = Field(default_factory=NvidiaSystemActions, alias="Actions")


class ActionInfoParameter(_Model):
    """One parameter of an ActionInfo."""

    name: str = Field(alias="Name")
    allowable_values: list[str] | None = Field(None, alias="AllowableValues")


class ActionInfo(_Model):
    """``@Redfish.ActionInfo`` target (ActionInfo schema)."""

    parameters: list[ActionInfoParameter] = Field(default_factory=list, alias="Parameters")


class ExternalHostPrivileges(_Model):
    """``GET /redfish/v1/Systems/Bluefield/Oem/Nvidia/Connectx/ExternalHostPrivileges``
    (BlueField-3 BMC 24.10 LTS to 25.07; NVIDIA BlueField BMC Software docs, "NIC Subsystem
    Management", releases 24.10-LTS ... 25.07: "Getting/Setting External Host Privileges").

    ``privileges``: every ``HostPriv*`` property (``HostPrivFlashAccess``, ``HostPrivFwUpdate``,
    ``HostPrivNicReset``, ``HostPrivNvGlobal``, ``HostPrivNvHost``, ``HostPrivNvInternalCpu``,
    ``HostPrivNvPort``, ``HostPrivPccUpdate``) with its value ``Default`` | ``Enabled`` |
    ``Disabled`` (the three states of the BMC 23.09 page's IPMI "Get external host privileges").
    """

    odata_id: str = Field(alias="@odata.id")
    privileges: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect(cls, data: Any) -> Any:
        if isinstance(data, dict):
            privs = {k: str(v) for k, v in data.items() if k.startswith("HostPriv")}
            return {"@odata.id": data.get("@odata.id", ""), "privileges": privs}
        return data


class HostPrivilegeConfig(_Model):
    """``GET /redfish/v1/Chassis/Card1/NetworkAdapters/NvidiaNetworkAdapter/Oem/Nvidia/HostPrivilegeConfig``
    and its ``/Settings`` (BlueField-3 BMC 25.10 and 26.01; NVIDIA BlueField BMC Software docs
    v25.10-LTS / v26.01, "NIC Subsystem Management", "Host Privileges Configuration").

    ``mode``: ``PrivilegeMode`` (``Privileged`` | ``Restricted`` presets, ``Custom`` when the single
    settings match neither); ``settings``: ``PrivilegeSettings`` (``HostPrivilegeLevel``,
    ``FirmwareUpdate`` ... ``TracerEnabled``); ``settings_path``: the ``@Redfish.Settings``
    object where changes are staged until the next reset.
    """

    odata_id: str = Field(alias="@odata.id")
    mode: str | None = Field(None, alias="PrivilegeMode")
    settings: dict[str, AttrValue] = Field(default_factory=dict, alias="PrivilegeSettings")
    redfish_settings: SettingsObject | None = Field(None, alias="@Redfish.Settings")
    etag: str | None = None

    @property
    def settings_path(self) -> str | None:
        """URI of the pending-settings resource, or None when the BMC stages nothing."""
        if self.redfish_settings is None or self.redfish_settings.settings_object is None:
            return None
        return self.redfish_settings.settings_object.odata_id
