"""fastblox"""
