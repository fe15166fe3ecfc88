"""botocore's data loader, without listing every AWS service to load one service's model.

``botocore.loaders.Loader.load_service_model`` first lists every service it knows
(``list_available_services``: each of ~450 directories under ``botocore/data`` and ``~/.aws/models`` listed,
and each API version's file looked for) only to refuse a name that is not among them; a client's creation
loads two models that way (``service-2`` and ``endpoint-rule-set-1``), and each model type is listed once.
Measured on botocore 1.44 (a 2-core machine): ~22 ms of CPU for the two listings, a third of the first
client's creation, on every Lambda cold start.

``ServiceLoader`` answers a service that has data of the asked type (``list_api_versions``, which lists that
service's directory alone) from that directory, and leaves every other name to botocore's own path, so an
unknown service still raises ``UnknownServiceError`` naming the known ones. The model loaded, its API
version (the latest unless one is asked) and the extras merged into it (``service-2.sdk-extras.json``) are
botocore's own.
"""

from __future__ import annotations

import os
from typing import Any

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader, instance_cache

__all__ = ["ServiceLoader", "create_loader"]


class ServiceLoader(Loader):  # type: ignore[misc]  # botocore is untyped
    """A ``botocore.loaders.Loader`` whose ``load_service_model`` looks in the service's own directory
    before listing every service (module docstring)."""

    @instance_cache  # type: ignore[untyped-decorator]
    def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
        """The ``type_name`` model of ``service_name`` (``api_version``, default the latest), as
        ``Loader.load_service_model`` returns it.

        Raises:
            botocore.exceptions.UnknownServiceError: no search path has ``type_name`` data for the service.
            botocore.exceptions.DataNotFoundError: no data for that API version.
        """
        try:
            versions = self.list_api_versions(service_name, type_name)
        except DataNotFoundError:
            # not a service this loader has data for: botocore's path, and its error naming the known ones
            return super().load_service_model(service_name, type_name, api_version)
        version = api_version if api_version is not None else max(versions)
        model = self.load_data(os.path.join(service_name, version, type_name))
        self._extras_processor.process(model, self._find_extras(service_name, type_name, version))
        return model


def create_loader(search_path_string: str | None = None) -> ServiceLoader:
    """A ``ServiceLoader`` over botocore's search paths plus ``search_path_string`` (``AWS_DATA_PATH``:
    paths separated by ``os.pathsep``, ``~`` and variables expanded), as ``botocore.loaders.create_loader``
    builds a ``Loader``."""
    if search_path_string is None:
        return ServiceLoader()
    paths = [os.path.expanduser(os.path.expandvars(p)) for p in search_path_string.split(os.pathsep)]
    return ServiceLoader(extra_search_paths=paths)
