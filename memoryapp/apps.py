from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memoryapp"
    verbose_name = "Memories"
