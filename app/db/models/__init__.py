"""All ORM models; importing this package registers every table on ``Base.metadata``."""

from app.db.models.tokens import ApiToken, Role

__all__ = ["ApiToken", "Role"]
