"""The optional SSH preparation sections ``hosts[].prep`` and ``hosts[].dpu.prep``: their fields,
the mlxconfig rule (names and ranges from ``domain.mlxconfig``, naming the key
path), lab-only ``sysroot``, unique targets, and that private keys never show in messages and are
refused in plain text in a stack file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from stack_config import EstateConfigError, load_estate, load_stack_file
from stack_config.loader import plaintext_secrets
from stack_config.models import DEFAULT_MLX_DEVICE
from stack_config.schema import SCHEMA_PATH
from tests.config.factories import (
    SSH_HOST_KEY,
    SSH_KEY_MARKER,
    SSH_PRIVATE_KEY,
    dpu_prep,
    encrypted,
    host_prep,
    valid_estate,
)


def _estate(**hosts: dict[str, Any]) -> dict[str, Any]:
    """The valid estate with ``host=`` / ``dpu=`` prep sections added to hosts[0] (hv-1)."""
    raw = valid_estate()
    if "host" in hosts:
        raw["hosts"][0]["prep"] = hosts["host"]
    if "dpu" in hosts:
        raw["hosts"][0]["dpu"]["prep"] = hosts["dpu"]
    return raw


def _problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(EstateConfigError) as err:
        load_estate(raw)
    return [str(p) for p in err.value.problems]


def test_sections_are_optional_and_default_to_no_reboot_and_no_reset() -> None:
    plain = load_estate(valid_estate())
    assert all(h.prep is None and (h.dpu is None or h.dpu.prep is None) for h in plain.hosts)

    known_hosts_line = f"10.0.2.1 {SSH_HOST_KEY}"
    hv1 = load_estate(_estate(host=host_prep(host_key=known_hosts_line), dpu=dpu_prep())).hosts[0]
    assert hv1.prep is not None and hv1.dpu is not None and hv1.dpu.prep is not None
    prep = hv1.prep
    assert (prep.port, prep.allow_reboot, prep.sysroot, prep.use_sudo) == (22, False, None, False)
    assert hv1.prep.host_key == SSH_HOST_KEY  # the known_hosts host field is dropped
    assert hv1.prep.private_key.get_secret_value() == SSH_PRIVATE_KEY
    assert (hv1.dpu.prep.device, hv1.dpu.prep.allow_firmware_reset) == (DEFAULT_MLX_DEVICE, False)


def test_private_key_and_pinned_host_key_are_required() -> None:
    section = host_prep()
    del section["private_key"], section["host_key"]
    assert _problems(_estate(host=section)) == [
        "hosts[0].prep.private_key: required key is missing (a secret; set it with: "
        "pulumi config set --secret --path 'estate.hosts[0].prep.private_key' < <key file>)",
        "hosts[0].prep.host_key: required key is missing",
    ]


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("host_key", "AAAAC3NzaC1lZDI1NTE5", "is not an SSH public host key '<type> <base64>'"),
        ("host_key", "ssh-ed25519 not*base64", "the host key is not valid base64"),
        ("port", 70000, "70000 is outside 1..65535"),
        ("user", "Root User", "String should match pattern"),
        ("allow_reboot", "sometimes", "Input should be a valid boolean"),
        ("sudo", True, "unknown key"),
    ],
)
def test_bad_connection_fields_name_the_key_and_never_show_the_private_key(
    field: str, value: Any, fragment: str
) -> None:
    (problem,) = _problems(_estate(host=host_prep(**{field: value})))
    assert problem.startswith(f"hosts[0].prep.{field}: ") and fragment in problem
    assert SSH_KEY_MARKER not in problem


def test_private_key_is_never_printed() -> None:
    estate = load_estate(_estate(host=host_prep(), dpu=dpu_prep()))
    assert SSH_KEY_MARKER not in repr(estate) and SSH_KEY_MARKER not in str(estate.model_dump())


def test_dpu_prep_fields() -> None:
    (problem,) = _problems(_estate(dpu=dpu_prep(device="/dev/mst/mt41692 pciconf0")))
    assert problem.startswith("hosts[0].dpu.prep.device: String should match pattern")
    dpu = load_estate(_estate(dpu=dpu_prep(device="03:00.0", allow_firmware_reset=True))).hosts[0].dpu
    assert dpu is not None and dpu.prep is not None
    assert (dpu.prep.device, dpu.prep.allow_firmware_reset) == ("03:00.0", True)


# mlxconfig: validated from config, before any resource is registered.


def test_unknown_parameter_is_refused_with_prep_and_suggests_the_name() -> None:
    raw = _estate(dpu=dpu_prep())
    raw["hosts"][0]["dpu"]["mlxconfig"] = {
        "VIRTIO_NET_EMULATION_ENABLE": 1,
        "VIRTIO_NET_EMULATION_NUM_PFS": 4,
    }
    assert _problems(raw) == [
        "hosts[0].dpu.mlxconfig.VIRTIO_NET_EMULATION_NUM_PFS: unknown mlxconfig parameter; "
        "did you mean VIRTIO_NET_EMULATION_NUM_PF?"
    ]


def test_without_prep_other_parameters_pass_through_to_the_flavor_but_ranges_still_apply() -> None:
    raw = valid_estate()
    raw["hosts"][0]["dpu"]["mlxconfig"] = {"INTERNAL_CPU_MODEL": 1, "VIRTIO_NET_EMULATION_ENABLE": "true"}
    assert load_estate(raw).hosts[0].dpu.mlxconfig["INTERNAL_CPU_MODEL"] == 1  # type: ignore[union-attr]
    raw["hosts"][0]["dpu"]["mlxconfig"]["VIRTIO_NET_EMULATION_ENABLE"] = 2
    assert _problems(raw) == [
        "hosts[0].dpu.mlxconfig.VIRTIO_NET_EMULATION_ENABLE: 2 is out of range 0..1 "
        "(source: Virtio-net Deployment, Mlxconfig Entries)"
    ]


def test_cross_parameter_limit_names_both_parameters() -> None:
    raw = _estate(dpu=dpu_prep())
    raw["hosts"][1]["dpu"]["mlxconfig"] = {
        "VIRTIO_NET_EMULATION_ENABLE": 1,
        "VIRTIO_NET_EMULATION_NUM_PF": 10,
        "VIRTIO_NET_EMULATION_NUM_VF": 20,
        "PCI_SWITCH_EMULATION_ENABLE": 1,
    }
    assert _problems(raw) == [
        "hosts[1].dpu.mlxconfig: VIRTIO_NET_EMULATION_NUM_PF*VIRTIO_NET_EMULATION_NUM_VF: 10*20=200 "
        "virtio-net VFs exceeds 127, the maximum while PCI_SWITCH_EMULATION_ENABLE=1 "
        "(disable hot-plug for more)"
    ]


def test_prep_needs_at_least_one_parameter_and_values_of_the_right_kind() -> None:
    raw = _estate(dpu=dpu_prep())
    raw["hosts"][0]["dpu"]["mlxconfig"] = {}
    assert _problems(raw) == ["hosts[0].dpu.mlxconfig: at least one mlxconfig parameter is required"]
    raw["hosts"][0]["dpu"]["mlxconfig"] = {"VIRTIO_NET_EMULATION_NUM_VF": "many"}
    assert _problems(raw) == ["hosts[0].dpu.mlxconfig.VIRTIO_NET_EMULATION_NUM_VF: 'many' is not an integer"]


# Other rules.


def test_sysroot_is_lab_only() -> None:
    raw = _estate(host=host_prep(sysroot="/tmp/lab/home/sysroot"))
    assert _problems(raw) == ["hosts[0].prep.sysroot: only allowed in environment lab, not staging"]
    raw["environment"] = "lab"
    assert load_estate(raw).hosts[0].prep.sysroot == "/tmp/lab/home/sysroot"  # type: ignore[union-attr]


def test_blacklisted_module_must_be_a_module_name_with_prep() -> None:
    raw = _estate(host=host_prep())
    raw["hosts"][0]["blacklisted_modules"] = ["nouveau", "nvidia/drm"]
    assert _problems(raw) == [
        "hosts[0].blacklisted_modules[1]: 'nvidia/drm' is not a module name that can be applied over SSH "
        "(prep is set)"
    ]
    del raw["hosts"][0]["prep"]
    assert load_estate(raw).hosts[0].blacklisted_modules == ["nouveau", "nvidia/drm"]  # user-data only


def test_dpus_may_share_a_server_but_not_a_device() -> None:
    raw = _estate(dpu=dpu_prep())
    raw["hosts"][1]["dpu"]["prep"] = dpu_prep(device="/dev/mst/mt41692_pciconf1")
    load_estate(raw)  # two cards behind one SSH server
    raw["hosts"][1]["dpu"]["prep"] = dpu_prep()
    assert _problems(raw) == [
        f"hosts[1].dpu.prep.device: duplicate DPU prep target '10.0.3.1:22 {DEFAULT_MLX_DEVICE}' "
        "(first at hosts[0].dpu.prep.device)"
    ]


def test_a_host_and_its_dpu_may_use_the_same_server() -> None:
    load_estate(_estate(host=host_prep(), dpu=dpu_prep(host="10.0.2.1")))  # mlxconfig run on the host OS


# Private keys only encrypted in stack files.


def test_plaintext_private_keys_in_a_stack_file_are_reported_without_the_key() -> None:
    raw = encrypted(_estate(host=host_prep(), dpu=dpu_prep()))
    raw["hosts"][0]["prep"]["private_key"] = SSH_PRIVATE_KEY
    raw["hosts"][1]["dpu"]["prep"] = dpu_prep(host="10.0.3.2")
    problems = [str(p) for p in plaintext_secrets(raw, file_name="Pulumi.x.yaml")]
    assert problems == [
        "hosts[0].prep.private_key: is in plain text in Pulumi.x.yaml; store it encrypted: "
        "pulumi config set --secret --path 'estate.hosts[0].prep.private_key' < <key file>",
        "hosts[1].dpu.prep.private_key: is in plain text in Pulumi.x.yaml; store it encrypted: "
        "pulumi config set --secret --path 'estate.hosts[1].dpu.prep.private_key' < <key file>",
    ]
    assert SSH_KEY_MARKER not in "".join(problems)
    assert plaintext_secrets(encrypted(valid_estate()), file_name="Pulumi.x.yaml") == []
    assert plaintext_secrets({"hosts": "nope"}, file_name="Pulumi.x.yaml") == []
    assert plaintext_secrets(None, file_name="Pulumi.x.yaml") == []


def test_stack_file_with_an_encrypted_key_loads_and_the_schema_refuses_plain_text(tmp_path: Path) -> None:
    raw = encrypted(_estate(host=host_prep()))
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump({"config": {"composable-gpu:estate": raw}}))
    assert load_stack_file(path).hosts[0].prep is not None

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    assert list(validator.iter_errors({"config": {"composable-gpu:estate": raw}})) == []
    raw["hosts"][0]["prep"]["private_key"] = SSH_PRIVATE_KEY
    best = jsonschema.exceptions.best_match(validator.iter_errors({"config": {"composable-gpu:estate": raw}}))
    assert best is not None and list(best.absolute_path)[2:] == ["hosts", 0, "prep", "private_key"]
    assert best.validator == "type"  # a string where only {secure: ...} is allowed


def test_stack_file_with_a_plaintext_private_key_is_refused_naming_the_key(tmp_path) -> None:
    from stack_config.stack_file import plaintext_secrets_in_stack_file

    # an inline stack file, as before the inventory folders (the dev stack before its migration)
    legacy = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "legacy" / "Pulumi.dev.yaml"
    dev = yaml.safe_load(legacy.read_text())
    estate = dev["config"]["composable-gpu:estate"]
    estate["hosts"][0]["prep"] = {**host_prep(), "private_key": SSH_PRIVATE_KEY}
    path = tmp_path / "Pulumi.plain.yaml"
    path.write_text(yaml.safe_dump(dev))
    problems = plaintext_secrets_in_stack_file(path)
    assert [p.path for p in problems] == ["hosts[0].prep.private_key"]
    with pytest.raises(EstateConfigError) as err:
        load_stack_file(path)
    assert "hosts[0].prep.private_key" in str(err.value)
    assert SSH_KEY_MARKER not in str(err.value)
    # The same key stored encrypted passes this check.
    estate["hosts"][0]["prep"]["private_key"] = {"secure": "v1:abc:def"}
    path.write_text(yaml.safe_dump(dev))
    assert plaintext_secrets_in_stack_file(path) == []


def test_misspelt_managed_parameter_without_prep_is_refused_with_a_hint() -> None:
    raw = _estate()
    raw["hosts"][1]["dpu"]["mlxconfig"] = {
        "VIRTIO_NET_EMULATON_ENABLE": 1,  # an "I" missing
        "VIRTIO_NET_EMULATION_NUM_PF": 10,
        "SOME_OTHER_FIRMWARE_PARAM": 3,  # unrelated names still pass through to the DPUFlavor
    }
    assert _problems(raw) == [
        "hosts[1].dpu.mlxconfig.VIRTIO_NET_EMULATON_ENABLE: unknown mlxconfig parameter; "
        "did you mean VIRTIO_NET_EMULATION_ENABLE?",
        "hosts[1].dpu.mlxconfig.VIRTIO_NET_EMULATION_ENABLE: must be 1 when VIRTIO_NET_EMULATION_NUM_PF "
        "is set (the emulation is off otherwise)",
    ]
