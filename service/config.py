"""Service settings, read from ``LORENTZTRON_*`` environment variables."""

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of one service process."""

    model_config = SettingsConfigDict(env_prefix="LORENTZTRON_")

    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"


@lru_cache
def get_settings() -> Settings:
    return Settings()
