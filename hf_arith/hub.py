"""Talking to the Hugging Face Hub: repo ids, the token, uploads, and the card templates.

Shared by the dataset export (`hf_arith.data.dataset_export`) and model publishing
(`hf_arith.publishing`). Every user mistake (a malformed repo id, no token, HF_HUB_OFFLINE, a
refused upload) is a one-line PublishError raised before or instead of a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from .data.errors import HfArithError, one_line

HUB_CARDS_DIR = Path(__file__).resolve().parent / "hub_cards"  # a link to the top-level hub_cards/, shipped as package data


class PublishError(HfArithError):
    """A publishing request that cannot go ahead, with a one-line reason."""



def check_repo_id(repo_id: str | None) -> str:
    """`ORG/NAME` as the Hub accepts it, or a one-line PublishError."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    text = (repo_id or "").strip()
    if text.count("/") != 1 or not all(text.split("/")):
        raise PublishError(f"repo id {repo_id!r} is malformed: expected ORG/NAME (a user or organization, "
                           "a slash, a repository name)")
    try:
        validate_repo_id(text)
    except HFValidationError as err:
        raise PublishError(f"repo id {repo_id!r} is malformed: {one_line(err)}") from None
    return text


def hub_token() -> str:
    """The token to upload with; one-line errors for offline mode and for no token at all."""
    from huggingface_hub import constants, get_token

    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}
    if constants.HF_HUB_OFFLINE or flag:
        raise PublishError("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to push, "
                           "or give --output-dir DIR to build the folder only")
    token = get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` with a write token, "
                           "or give --output-dir DIR to build the folder only")
    return token


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of the HTTP clients huggingface_hub may use (they are not OSErrors)."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(__import__(name).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def send_folder(folder: str | os.PathLike, repo_id: str, token: str, *, repo_type: str = "model", private: bool = False,
            commit_message: str | None = None, endpoint: str | None = None) -> str:
    """Create the repo if needed and upload `folder`, for a checked repo id and token; returns the repo URL."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi(token=token, endpoint=endpoint)
    where = endpoint or constants.ENDPOINT
    transport = _transport_errors()
    try:
        url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type=repo_type,
                          commit_message=commit_message or "Upload with hf-arith")
    except OfflineModeIsEnabled:
        raise PublishError("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to push") from None
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status == 401:
            raise PublishError(f"the Hub rejected the token (401): log in again with `hf auth login` ({where})") from None
        if status == 403:
            raise PublishError(f"this token may not write to {repo_id} (403): use a write token for that namespace") from None
        raise PublishError(f"the Hub refused the upload to {repo_id}: {one_line(err)}") from None
    except (*transport, OSError) as err:
        raise PublishError(f"no network: cannot reach {where} ({one_line(err)})") from None
    return str(url)


def upload_folder(folder: str | os.PathLike, repo_id: str, *, repo_type: str = "model", token: str | None = None,
                  private: bool = False, commit_message: str | None = None, endpoint: str | None = None) -> str:
    """Check the repo id (and find a token when none is given), create the repo if needed and
    upload every file of `folder`; returns the repo URL."""
    return send_folder(folder, check_repo_id(repo_id), token or hub_token(), repo_type=repo_type, private=private,
                   commit_message=commit_message, endpoint=endpoint)
